//! Fuzzed, schema-valid arguments run through every tool's handler, in-process, on a daemon
//! started by `daemon::start` with its normal wiring (the built `toolvisor` as the shim): the
//! arguments each tool's input schema admits (generated from the registry's schemas, strings
//! from vocabularies of paths that stay in, climb out of, or go through symbolic links and a
//! FIFO out of a throwaway workdir), passed by the validator, then run as the session runs a
//! call that passed its gates (`tools::run`, approval taken as given). Each case is a short
//! sequence of calls in a fresh copy of the tree and a conversation of its own, ended after
//! (`Daemon::end_conversation`): often a call that makes something (`setup_for`), a few
//! others, the call under test, a few more. `{ID}` in an argument is the last id a call of the
//! case answered under the same key (a process, staged edit, worker, stored result, data
//! handle), so later calls reach what earlier ones made. Asserted for every call: no panic
//! anywhere in the process (a panic hook counts them), no `internal` error, every refusal a
//! kind a handler answers (not a gate's) with a message and a hint, an answer within 30 s, and
//! nothing beside the workdir changed — a sentinel directory beside it (contents, sizes,
//! mtimes) and the levels above it (nothing created). Read-tier calls must also leave the
//! workdir as it was. The last test shows each check failing.
//!
//! Covered: every tool the registry holds but the two lane probes (test tools); each is the
//! call under test in `TOOLVISOR_HANDLER_FUZZ_CASES` cases (default 12): read-tier tools with
//! read-tier calls around them, write and exec tools among calls of any tier. Live servers are
//! wired as configured but absent where starting one costs seconds or depends on what the
//! machine has: language servers, debug adapters, the node kernel and the inference servers
//! name a binary that does not exist, so their handlers run up to the start and must answer a
//! named refusal; the model hub is a closed loopback port. The Python kernel is real
//! (`python3`, cheap), vibe workers run `true`, and the data hub serves a collection inside the
//! workdir. Not asserted: where `bash`, `process`, `eval` and vibe workers write (they are not
//! confined by design); their commands come from a harmless vocabulary. A failure prints the
//! calls (placeholders unexpanded) and proptest saves its seed in
//! `handlers_fuzz.proptest-regressions`, replayed first on the next run.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};
use proptest::test_runner::{Config as ProptestConfig, FileFailurePersistence, TestRunner};
use serde_json::{Value as Json, json};
use toolvisor::config::Config;
use toolvisor::daemon::{Daemon, ServeOptions, Started};
use toolvisor::registry::validate;
use toolvisor::tools::{BoxFuture, CallCtx, Caller, ToolSpec};
use toolvisor_kernel::{Bridge, BridgeFuture};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::{Event, Tier};

/// Cases per tool under test, per property.
fn cases() -> u32 {
    std::env::var("TOOLVISOR_HANDLER_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

/// How long one call may take before it counts as a hang.
const CALL_LIMIT: Duration = Duration::from_secs(30);

/// Panics anywhere in the process (handlers, actors, blocking threads) since the hook was set.
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            default(info)
        }));
    });
}

/// What handlers may answer: every kind but `internal` and the gates' and sessions' own
/// (`policy_denied` is a handler's too: `debug attach` to the daemon's ancestors, a checker
/// in an untrusted root).
fn a_handlers_kind(kind: ErrorKind) -> bool {
    !matches!(
        kind,
        ErrorKind::Internal
            | ErrorKind::UnknownTool
            | ErrorKind::SurfaceDenied
            | ErrorKind::ApprovalDenied
            | ErrorKind::Protocol
            | ErrorKind::VersionMismatch
            | ErrorKind::Refused
            | ErrorKind::ShuttingDown
            | ErrorKind::Cancelled
    )
}

// ---------------------------------------------------------------------------------------
// Vocabularies. `{TOP}` is the directory holding everything, `{WORK}` the workdir, `{ID}`
// the last id a call of the case answered; they are expanded just before a call.

const PATHS: &[&str] = &[
    "notes.txt",
    "a.py",
    "b.rs",
    "sub",
    "sub/c.txt",
    "sub/deep/d.md",
    "docs/readme.md",
    "new.txt",
    "sub/new/n.py",
    ".",
    "",
    ".hidden",
    "image.png",
    "fifo",
    "link_out",
    "link_out/secret.txt",
    "link_out/new.txt",
    "link_file",
    "link_abs",
    "link_loop",
    "..",
    "../sentinel/secret.txt",
    "../sentinel/new.txt",
    "../../outside.txt",
    "../../new_outside.txt",
    "sub/../../sentinel/secret.txt",
    "{TOP}/nest/sentinel/secret.txt",
    "{TOP}/nest/sentinel",
    "{TOP}/new_outside.txt",
    "{WORK}/notes.txt",
    "{WORK}/../sentinel/sub/inner.txt",
    "/etc/hostname",
    "/proc/self/environ",
    "/dev/zero",
    "~/x",
    "no/such/file.txt",
    "é🦀.txt",
    "nul\u{0}byte",
    "*",
];

const PATTERNS: &[&str] = &[
    "$A",
    "print($A)",
    "def $F($$$ARGS): $$$BODY",
    "fn $F() { $$$ }",
    "*.py",
    "**/*",
    "**/*.txt",
    "alpha|beta",
    "TODO",
    ".*",
    "(",
    "[",
    "\\",
    "link_out/*",
    "../*",
    "{TOP}/**",
    "",
];

const TEXTS: &[&str] = &[
    "",
    "x",
    "alpha",
    "beta\n",
    "new($A)",
    "x = 1\n",
    "gamma\n",
    "é🦀",
    "\u{0}",
    "TODO",
    "$$$BODY",
    "fn main() {}\n",
];

const PATCHES: &[&str] = &[
    "*** Begin Patch\n*** Add File: added.txt\n+one\n*** End Patch\n",
    "*** Begin Patch\n*** Update File: notes.txt\n@@\n-alpha\n+ALPHA\n*** End Patch\n",
    "*** Begin Patch\n*** Delete File: sub/c.txt\n*** End Patch\n",
    "*** Begin Patch\n*** Update File: notes.txt\n*** Move to: ../moved.txt\n@@\n-alpha\n+ALPHA\n*** End Patch\n",
    "*** Begin Patch\n*** Add File: ../sentinel/added.txt\n+x\n*** End Patch\n",
    "*** Begin Patch\n*** Add File: link_out/added.txt\n+x\n*** End Patch\n",
    "*** Begin Patch\n*** Update File: link_file\n@@\n-secret\n+public\n*** End Patch\n",
    "*** Begin Patch\n*** Delete File: link_out/secret.txt\n*** End Patch\n",
    "*** Begin Patch\n*** Delete File: {TOP}/outside.txt\n*** End Patch\n",
    "*** Begin Patch\n*** Update File: fifo\n@@\n-a\n+b\n*** End Patch\n",
    "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n-alpha\n+ALPHA\n beta\n",
    "--- a/../sentinel/secret.txt\n+++ b/../sentinel/secret.txt\n@@ -1 +1 @@\n-secret\n+public\n",
    "--- /dev/null\n+++ b/link_out/made.txt\n@@ -0,0 +1 @@\n+x\n",
    "*** Begin Patch\n*** End Patch\n",
    "",
];

const COMMANDS: &[&str] = &[
    "true",
    "echo hi",
    "cat notes.txt",
    "ls -la",
    "exit 3",
    "printf 'x%.0s' $(seq 1 60000)",
    "cat link_out/secret.txt",
    "pwd",
    "echo made > made.txt",
    "sleep 0.2",
    "cat",
    "",
];

const CODE: &[&str] = &[
    "1 + 1",
    "print('hi')",
    "import os\nprint(os.getcwd())",
    "raise ValueError('x')",
    "undefined_name",
    "def f(:",
    "r = tool('read', {'path': 'notes.txt'})\nprint(r)",
    "print(open('notes.txt').read())",
    "print('y' * 100000)",
    "%pwd",
    "",
];

const IDS: &[&str] = &[
    "{ID}",
    "{ID}",
    "{ID}",
    "{ID}",
    "",
    "x",
    "p1",
    "e1",
    "v1",
    "j1",
    "../x",
    "1",
    "D1",
    "D2",
    "d0",
    "D-1",
    "D99999999999999999999",
    "tr_",
    "tr_../x",
];

const NAMES: &[&str] = &[
    "owner/name",
    "owner/name-GGUF",
    "",
    "../x",
    "a/b/c",
    "main",
    "Q4_K_M",
    "x.gguf",
];

const QUERIES: &[&str] = &["alpha", "", "*", "\"", "NEAR(", "alpha OR", "é", "readme"];

const SYMBOLS: &[&str] = &["alpha", "f", "main", "A.b", "Point/x", "", "é"];

const COLLECTIONS: &[&str] = &["docs", "", "nope", "../x"];

const GENERAL: &[&str] = &[
    "",
    "x",
    "a b c",
    "../../outside.txt",
    "é🦀\u{0}",
    "*",
    "42",
    "{TOP}/outside.txt",
    "-rf",
    "--help",
    "\n",
    "python",
    "rust",
];

const WORDS: &[&str] = &["read", "the", "notes", "file", "and", "print", "é🦀", "x"];

/// The vocabulary a string field draws from, by its name (the schema names the field).
fn vocabulary(field: &str) -> &'static [&'static str] {
    match field {
        "path" | "file" | "cwd" | "program" | "module" => PATHS,
        "pattern" | "glob" => PATTERNS,
        "rewrite" | "new_text" | "old_text" | "content" | "text" | "value" | "data"
        | "condition" | "log_message" | "hit_condition" => TEXTS,
        "patch" => PATCHES,
        "command" => COMMANDS,
        "code" | "expression" => CODE,
        "id" | "edit_id" | "worker_id" | "job_id" | "ref" | "handle" => IDS,
        "repo" | "revision" | "variant" | "model" | "alias" => NAMES,
        "query" => QUERIES,
        "symbol" | "symbol_path" | "new_name" | "name" => SYMBOLS,
        "collection" | "tag" | "section" => COLLECTIONS,
        "language" | "adapter" => &["python", "rust", "javascript", "debugpy", "", "klingon"],
        _ => GENERAL,
    }
}

fn pick(words: &'static [&'static str]) -> BoxedStrategy<Json> {
    prop::sample::select(words).prop_map(Json::from).boxed()
}

/// The range a schema's integer allows (unbounded ends cut where values stop meaning more).
fn bounds(schema: &Json) -> (i64, i64) {
    let min = schema
        .get("minimum")
        .and_then(Json::as_i64)
        .unwrap_or(-1 << 20);
    let max = schema
        .get("maximum")
        .and_then(Json::as_i64)
        .unwrap_or(1 << 40);
    (min, max.max(min))
}

/// Values `schema` admits, for the field named `field`.
fn values(schema: &Json, field: &str) -> BoxedStrategy<Json> {
    if let Some(allowed) = schema.get("enum").and_then(Json::as_array) {
        return prop::sample::select(allowed.clone()).boxed();
    }
    let ty = match schema.get("type") {
        Some(Json::String(t)) => t.as_str(),
        Some(Json::Array(ts)) => ts
            .iter()
            .filter_map(Json::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ => "any",
    };
    match ty {
        "string" => {
            let words = schema.get("minWords").and_then(Json::as_u64);
            if let Some(min) = words {
                let max = schema.get("maxWords").and_then(Json::as_u64).unwrap_or(min);
                return prop::collection::vec(
                    prop::sample::select(WORDS),
                    min as usize..=max as usize,
                )
                .prop_map(|w| Json::from(w.join(" ")))
                .boxed();
            }
            prop_oneof![4 => pick(vocabulary(field)), 1 => pick(GENERAL)].boxed()
        }
        "integer" => {
            let (min, max) = bounds(schema);
            let mut edges = vec![
                min,
                max,
                min.saturating_add(1).min(max),
                max.saturating_sub(1).max(min),
            ];
            edges.extend(
                [0, 1, 2, 3, 10, 100]
                    .iter()
                    .copied()
                    .filter(|n| (min..=max).contains(n)),
            );
            prop_oneof![
                2 => prop::sample::select(edges).prop_map(Json::from),
                1 => (min..=max).prop_map(Json::from),
            ]
            .boxed()
        }
        "number" => prop::sample::select(vec![0.0, 0.5, 1e9])
            .prop_map(Json::from)
            .boxed(),
        "boolean" => any::<bool>().prop_map(Json::from).boxed(),
        "array" => {
            let items = schema
                .get("items")
                .cloned()
                .unwrap_or(json!({"type": "string"}));
            prop::collection::vec(values(&items, field), 0..4)
                .prop_map(Json::Array)
                .boxed()
        }
        "object" if schema.get("properties").is_some() => object(schema),
        "object" => match schema.get("additionalProperties") {
            Some(inner) if inner.is_object() => prop::collection::btree_map(
                prop::sample::select(&["A", "PATH", "LD_PRELOAD", "HOME"][..]),
                values(inner, "value"),
                0..3,
            )
            .prop_map(|m| Json::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
            .boxed(),
            _ => Just(json!({})).boxed(),
        },
        _ => pick(GENERAL),
    }
}

/// An object `schema` admits: its required properties always, each other one or not.
fn object(schema: &Json) -> BoxedStrategy<Json> {
    let required: Vec<String> = schema
        .get("required")
        .and_then(Json::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Json::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let fields: Vec<BoxedStrategy<Option<(String, Json)>>> = schema
        .get("properties")
        .and_then(Json::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(key, prop)| {
                    let key = key.clone();
                    let value = values(prop, &key);
                    if required.contains(&key) {
                        value.prop_map(move |v| Some((key.clone(), v))).boxed()
                    } else {
                        prop::option::of(value.prop_map(move |v| (key.clone(), v))).boxed()
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    fields
        .prop_map(|fields| Json::Object(fields.into_iter().flatten().collect()))
        .boxed()
}

/// One call: the tool's name and its arguments (placeholders unexpanded).
type FuzzCall = (&'static str, Json);

fn calls_of(spec: &ToolSpec) -> BoxedStrategy<FuzzCall> {
    let name = spec.name;
    object(&spec.schema).prop_map(move |a| (name, a)).boxed()
}

/// Only the calls that run at the read tier (`lsp trust` is write tier, say).
fn read_calls_of(spec: &ToolSpec) -> BoxedStrategy<FuzzCall> {
    let tiered = spec.clone();
    calls_of(spec)
        .prop_filter("a read-tier call", move |(_, a)| {
            tiered.call_tier(a) == Tier::Read
        })
        .boxed()
}

// ---------------------------------------------------------------------------------------
// The world: a throwaway tree, a sentinel beside it, a daemon.

/// Stands in for the session: events are counted, eval cells' `tool()` calls echo.
#[derive(Default)]
struct FuzzCaller;

struct EchoBridge;

impl Bridge for EchoBridge {
    fn call(&self, _tool: String, args: Json) -> BridgeFuture {
        Box::pin(async move { Ok(args) })
    }
}

impl Caller for FuzzCaller {
    fn event(&self, _call: u64, _event: Event) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    fn bridge(&self, _ctx: &CallCtx) -> Arc<dyn Bridge> {
        Arc::new(EchoBridge)
    }
}

/// A binary no machine has: what absent servers are configured to run.
const ABSENT: &str = "toolvisor-fuzz-no-such-binary";

/// One daemon at a time in this process: the root actor's name is process-wide, and so is the
/// panic count (under `cargo test` the tests share a process; nextest gives each its own).
static ONE_DAEMON: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct World {
    _dir: tempfile::TempDir,
    top: PathBuf,
    work: PathBuf,
    runtime: tokio::runtime::Runtime,
    _bound: toolvisor::listener::Bound,
    started: Option<Started>,
    daemon: Arc<Daemon>,
    /// What lies outside the workdir (and the daemon's own files) as the daemon started.
    outside: BTreeMap<PathBuf, String>,
    next_case: AtomicUsize,
    /// Outcomes per tool (`ok` or the error kind), printed at the end.
    outcomes: std::sync::Mutex<BTreeMap<&'static str, BTreeMap<String, usize>>>,
    /// Last, so that it is given up once everything else is gone.
    _one: std::sync::MutexGuard<'static, ()>,
}

fn seed_tree(top: &Path, work: &Path) {
    for entry in std::fs::read_dir(work).unwrap() {
        let path = entry.unwrap().path();
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => {
                // Tools may leave a directory read-only; make it removable first.
                let _ = std::process::Command::new("chmod")
                    .arg("-R")
                    .arg("u+rwx")
                    .arg(&path)
                    .status();
                std::fs::remove_dir_all(&path).unwrap()
            }
            Ok(_) => std::fs::remove_file(&path).unwrap(),
            Err(_) => {}
        }
    }
    let file = |rel: &str, text: &[u8]| {
        let path = work.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    file("notes.txt", b"alpha\nbeta\nTODO gamma\n");
    file("a.py", b"def f(x):\n    print(x)\n\nalpha = f(1)\n");
    file("b.rs", b"fn main() {\n    println!(\"alpha\");\n}\n");
    file("sub/c.txt", b"gamma\n");
    file("sub/deep/d.md", b"# Deep\n\nalpha beta\n");
    file("docs/readme.md", b"# Readme\n\nThe alpha document.\n");
    file(".hidden", b"hidden alpha\n");
    let big: String = (0..5000).map(|n| format!("alpha line {n}\n")).collect();
    file("big.txt", big.as_bytes());
    file("image.png", b"\x89PNG\r\n\x1a\nnot really");
    nix::unistd::mkfifo(&work.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let link =
        |target: &Path, name: &str| std::os::unix::fs::symlink(target, work.join(name)).unwrap();
    link(Path::new("../sentinel"), "link_out");
    link(Path::new("../sentinel/secret.txt"), "link_file");
    link(&top.join("outside.txt"), "link_abs");
    link(Path::new("link_loop"), "link_loop");
}

/// Every entry under `root` but the `skip`ped ones, with what would show a change: type,
/// mode, size, mtime, a link's target, a file's bytes.
fn snapshot(root: &Path, skip: &[PathBuf]) -> BTreeMap<PathBuf, String> {
    let mut seen = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if skip.contains(&path) {
                continue;
            }
            let Ok(m) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let mut facts = format!(
                "{:o} {} {}.{}",
                m.mode(),
                m.len(),
                m.mtime(),
                m.mtime_nsec()
            );
            if m.file_type().is_symlink() {
                facts += &format!(" -> {:?}", std::fs::read_link(&path).ok());
            } else if m.is_file() {
                facts += &format!(" {:?}", std::fs::read(&path).ok());
            } else if m.is_dir() {
                stack.push(path.clone());
            }
            seen.insert(path, facts);
        }
    }
    seen
}

fn differences(
    before: &BTreeMap<PathBuf, String>,
    after: &BTreeMap<PathBuf, String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (path, was) in before {
        match after.get(path) {
            None => out.push(format!("removed {}", path.display())),
            Some(now) if now != was => out.push(format!("changed {}", path.display())),
            _ => {}
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        out.push(format!("created {}", path.display()));
    }
    out
}

impl World {
    fn new() -> World {
        let one = ONE_DAEMON.lock().unwrap_or_else(|e| e.into_inner());
        count_panics();
        let dir = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(dir.path()).unwrap();
        let nest = top.join("nest");
        let work = nest.join("work");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(nest.join("sentinel/sub")).unwrap();
        std::fs::write(nest.join("sentinel/secret.txt"), "secret\n").unwrap();
        std::fs::write(nest.join("sentinel/sub/inner.txt"), "inner\n").unwrap();
        std::fs::write(top.join("outside.txt"), "outside\n").unwrap();
        seed_tree(&top, &work);
        let state = top.join("state");
        let socket = top.join("toolvisor.sock");
        // The model hub: a loopback port just closed, so connecting is refused at once.
        let hub_port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let text = format!(
            "state_dir = {state:?}\n\
             [models]\nendpoint = \"http://127.0.0.1:{hub_port}\"\nconnect_timeout_s = 2\nretries = 0\n\
             [data.collections.docs]\npath = {:?}\n\
             [vibe.tiers.fast]\ncommand = [\"true\", \"{{brief}}\"]\n\
             [testing]\nprobe_tools = true\n",
            work.join("docs")
        );
        let path = top.join("config.toml");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        let mut config = Config::load(Some(&path)).expect("the fuzz's configuration loads");
        // Servers that take seconds to start, or exist on some machines only, are absent.
        for spec in config.lsp.languages.values_mut() {
            spec.servers = vec![vec![ABSENT.into()]];
            spec.checker = None;
        }
        for spec in config.debug.adapters.values_mut() {
            spec.commands = vec![vec![ABSENT.into()]];
        }
        config.debug.python = Some(ABSENT.into());
        config.kernels.node = Some(ABSENT.into());
        config.kernels.typescript = Some(ABSENT.into());
        for command in config.inference.commands.values_mut() {
            *command = vec![ABSENT.into()];
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        // Bound as `serve` binds it (nothing accepts on it: calls go in-process).
        let bound = toolvisor::listener::bind(&socket).expect("bind the socket");
        let options = ServeOptions {
            shim: Some(PathBuf::from(env!("CARGO_BIN_EXE_toolvisor"))),
        };
        let started = runtime
            .block_on(toolvisor::daemon::start(&bound, config, &options))
            .expect("the daemon starts");
        let daemon = started.daemon.clone();
        let outside = snapshot(&top, &World::own(&top));
        World {
            _dir: dir,
            top,
            work,
            runtime,
            _bound: bound,
            started: Some(started),
            daemon,
            outside,
            next_case: AtomicUsize::new(0),
            outcomes: Default::default(),
            _one: one,
        }
    }

    /// What is not outside: the workdir, and the daemon's state and socket files.
    fn own(top: &Path) -> Vec<PathBuf> {
        let mut own = vec![top.join("nest/work"), top.join("state")];
        for suffix in ["", ".lock", ".ledger", ".inference", ".start-lock"] {
            own.push(top.join(format!("toolvisor.sock{suffix}")));
        }
        own
    }

    /// `{TOP}` and `{WORK}` in every string of `value`, and an `{ID}` under key `key` the
    /// last id the case was answered under that key (`none` before).
    fn expand(&self, value: &mut Json, key: &str, ids: &BTreeMap<String, String>) {
        match value {
            Json::String(s) => {
                let id = ids.get(key).map_or("none", String::as_str);
                *s = s
                    .replace("{TOP}", &self.top.display().to_string())
                    .replace("{WORK}", &self.work.display().to_string())
                    .replace("{ID}", id)
            }
            Json::Array(items) => items.iter_mut().for_each(|v| self.expand(v, key, ids)),
            Json::Object(map) => map.iter_mut().for_each(|(k, v)| self.expand(v, k, ids)),
            _ => {}
        }
    }

    /// Run one case: the calls in order in a fresh tree and conversation, each checked.
    fn case(&self, calls: &[FuzzCall], read_only: bool) -> Result<(), TestCaseError> {
        let n = self.next_case.fetch_add(1, Ordering::SeqCst);
        let conversation = format!("fuzz-{n}");
        seed_tree(&self.top, &self.work);
        let result = self.runtime.block_on(async {
            let mut ids = BTreeMap::new();
            for (tool, args) in calls {
                let mut args = args.clone();
                self.expand(&mut args, "", &ids);
                let spec = self
                    .daemon
                    .registry()
                    .get(tool)
                    .unwrap_or_else(|| panic!("the registry holds `{tool}`"));
                if let Err(e) = validate(tool, &spec.schema, &args) {
                    return Err(TestCaseError::fail(format!(
                        "{tool} {args}: the generator made arguments the validator refuses: {e}"
                    )));
                }
                let work_before = read_only.then(|| snapshot(&self.work, &[]));
                let panics = PANICS.load(Ordering::SeqCst);
                let answer = self.call(&conversation, tool, args.clone()).await;
                let what = format!("{tool} {args}");
                let outcome = match &answer {
                    Ok(Ok(_)) => "ok".to_string(),
                    Ok(Err(e)) => e.kind.as_str().to_string(),
                    Err(_) => "failed".to_string(),
                };
                *self
                    .outcomes
                    .lock()
                    .unwrap()
                    .entry(tool)
                    .or_default()
                    .entry(outcome)
                    .or_default() += 1;
                if PANICS.load(Ordering::SeqCst) != panics {
                    return Err(TestCaseError::fail(format!("{what}: something panicked")));
                }
                match answer {
                    Err(why) => return Err(TestCaseError::fail(format!("{what}: {why}"))),
                    Ok(Ok(result)) => harvest_ids(&result, &mut ids),
                    Ok(Err(e)) => {
                        if !a_handlers_kind(e.kind) {
                            return Err(TestCaseError::fail(format!(
                                "{what}: answered {:?}: {} (hint: {})",
                                e.kind, e.message, e.hint
                            )));
                        }
                        if e.message.trim().is_empty() || e.hint.trim().is_empty() {
                            return Err(TestCaseError::fail(format!(
                                "{what}: an error without a message or a hint: {e:?}"
                            )));
                        }
                    }
                }
                let changed =
                    differences(&self.outside, &snapshot(&self.top, &World::own(&self.top)));
                if !changed.is_empty() {
                    return Err(TestCaseError::fail(format!(
                        "{what}: touched outside the workdir: {changed:?}"
                    )));
                }
                if let Some(before) = work_before {
                    let changed = differences(&before, &snapshot(&self.work, &[]));
                    if !changed.is_empty() {
                        return Err(TestCaseError::fail(format!(
                            "{what}: a read-tier call changed the workdir: {changed:?}"
                        )));
                    }
                }
            }
            Ok(())
        });
        self.runtime
            .block_on(self.daemon.end_conversation(&conversation));
        result
    }

    /// One call as the session runs it once its gates passed, in a task of its own (a panic
    /// is a join error), bounded by [`CALL_LIMIT`].
    async fn call(
        &self,
        conversation: &str,
        tool: &'static str,
        args: Json,
    ) -> Result<Result<Json, ToolError>, String> {
        let daemon = self.daemon.clone();
        let ctx = CallCtx {
            id: 1,
            conversation: conversation.into(),
            workdir: self.work.clone(),
            run_id: String::new(),
            surface: Tier::Exec,
            caller: Arc::new(FuzzCaller),
        };
        let task = tokio::spawn(async move {
            let spec = daemon.registry().get(tool).expect("a registered tool");
            let call = spec.prepare(&args)?;
            toolvisor::tools::run(daemon.services(), &ctx, spec, call).await
        });
        match tokio::time::timeout(CALL_LIMIT, task).await {
            Err(_) => Err(format!("no answer within {} s", CALL_LIMIT.as_secs())),
            Ok(Err(e)) if e.is_panic() => Err("the handler panicked".into()),
            Ok(Err(e)) => Err(format!("the call's task failed: {e}")),
            Ok(Ok(answer)) => Ok(answer),
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        eprintln!("outcomes per tool:");
        for (tool, outcomes) in self.outcomes.lock().unwrap().iter() {
            eprintln!("  {tool}: {outcomes:?}");
        }
        if let Some(started) = self.started.take() {
            self.runtime.block_on(started.shutdown());
        }
    }
}

/// The fields whose values name something a later call can reach.
const ID_KEYS: &[&str] = &["id", "edit_id", "worker_id", "job_id", "ref", "handle"];

/// The id-like strings of a result, by key (the last one seen wins).
fn harvest_ids(value: &Json, ids: &mut BTreeMap<String, String>) {
    match value {
        Json::Object(map) => {
            for (key, v) in map {
                match v {
                    Json::String(s) if ID_KEYS.contains(&key.as_str()) => {
                        ids.insert(key.clone(), s.clone());
                    }
                    _ => harvest_ids(v, ids),
                }
            }
        }
        Json::Array(items) => items.iter().for_each(|v| harvest_ids(v, ids)),
        _ => {}
    }
}

/// Every tool but the lane probes, with each one's registered spec.
fn tools(world: &World) -> Vec<ToolSpec> {
    let surface = toolvisor_protocol::wire::Surface {
        max_tier: Tier::Exec,
        approvals: true,
        questions: false,
        bridge_tools: Vec::new(),
    };
    toolvisor::tools::all(false)
        .into_iter()
        .map(|t| {
            world
                .daemon
                .registry()
                .check(t.name, &surface)
                .unwrap_or_else(|e| panic!("`{}` is attached in the fuzz's wiring: {e}", t.name))
                .as_ref()
                .clone()
        })
        .collect()
}

/// A call that makes what `tool` names by id, so that the call under test can reach it (its
/// `{ID}`): a worker, a staged edit, a process, a stored result, a document handle.
fn setup_for(tool: &str) -> Option<FuzzCall> {
    let call = match tool {
        "vibe_wait" | "vibe_kill" | "vibe_send" => (
            "vibe_spawn",
            json!({"brief": "read the notes", "label": "fuzz"}),
        ),
        "resolve" => (
            "ast_edit",
            json!({"pattern": "print($A)", "rewrite": "echo($A)", "language": "python"}),
        ),
        "process" => ("process", json!({"op": "start", "command": "sleep 5"})),
        "tool_result_read" => ("grep", json!({"pattern": "alpha", "max_results": 100000})),
        "read_data" | "write_data" | "delete_data" => ("list_data", json!({})),
        _ => return None,
    };
    Some(call)
}

/// For each tool `under_test` admits: cases of a few other calls, a call of it, a few more.
fn fuzz(read_only: bool) {
    let world = World::new();
    let all = tools(&world);
    let eligible: Vec<&ToolSpec> = all
        .iter()
        .filter(|t| !read_only || t.tier == Tier::Read)
        .collect();
    let strategy = |t: &ToolSpec| {
        if read_only {
            read_calls_of(t)
        } else {
            calls_of(t)
        }
    };
    let any_call = Union::new(eligible.iter().map(|t| strategy(t))).boxed();
    let under_test: Vec<&ToolSpec> = eligible
        .iter()
        .copied()
        .filter(|t| read_only || t.tier != Tier::Read)
        .collect();
    assert!(
        under_test.len() >= 10,
        "{} tools under test",
        under_test.len()
    );
    for spec in under_test {
        let setup = setup_for(spec.name);
        let sequence = (
            prop::bool::weighted(0.75),
            prop::collection::vec(any_call.clone(), 0..3),
            strategy(spec),
            prop::collection::vec(any_call.clone(), 0..2),
        )
            .prop_map(move |(set_up, mut before, call, after)| {
                if set_up && let Some(first) = &setup {
                    before.insert(0, first.clone());
                }
                before.push(call);
                before.extend(after);
                before
            });
        let config = ProptestConfig {
            cases: cases(),
            source_file: Some(file!()),
            failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
                "proptest-regressions",
            ))),
            max_shrink_iters: 64,
            ..ProptestConfig::default()
        };
        let mut runner = TestRunner::new(config);
        if let Err(e) = runner.run(&sequence, |calls| world.case(&calls, read_only)) {
            panic!("fuzzing `{}`: {e}", spec.name);
        }
    }
}

#[test]
fn fuzzed_read_tier_calls_reach_every_handler_and_change_nothing() {
    fuzz(true);
}

#[test]
fn fuzzed_write_and_exec_calls_with_approval_stay_inside_the_workdir() {
    fuzz(false);
}

/// The checks can fail: a read-tier call that changed the workdir, a panicking handler (the
/// lane probe asked to panic), a change beside the workdir and a file made above it each fail
/// their case, naming it.
#[test]
fn fuzz_checks_fail_on_a_changed_workdir_a_panic_and_a_write_beside_the_workdir() {
    let bash = |command: &str| ("bash", json!({ "command": command }));
    let failure = |world: &World, calls: &[FuzzCall], read_only| match world.case(calls, read_only)
    {
        Err(e) => e.to_string(),
        Ok(()) => panic!("{calls:?} passed the checks"),
    };
    let world = World::new();
    let why = failure(&world, &[bash("echo x > made.txt")], true);
    assert!(
        why.contains("changed the workdir") && why.contains("made.txt"),
        "{why}"
    );
    world
        .case(&[bash("echo x > made.txt")], false)
        .expect("a write in the workdir is fine");
    let probe = ("_probe_parallel", json!({"tag": "t", "panic": true}));
    let why = failure(&world, &[probe], false);
    assert!(why.contains("panicked"), "{why}");
    let why = failure(&world, &[bash("echo x >> ../sentinel/secret.txt")], false);
    assert!(
        why.contains("touched outside") && why.contains("secret.txt"),
        "{why}"
    );
    drop(world);
    let world = World::new();
    let why = failure(&world, &[bash("touch ../../made_outside.txt")], false);
    assert!(
        why.contains("created") && why.contains("made_outside.txt"),
        "{why}"
    );
}

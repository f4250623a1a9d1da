//! Figures of the language-server tools (`cargo bench -p toolvisor --bench lsp`), with a real
//! pyright (`scripts/install-test-deps`):
//! - median `lsp hover` latency through toolvisor, next to the server's own share of the same
//!   calls (request sent → answer parsed inside the daemon: the added latency is the rest), and
//!   next to the same hover sent directly to a second warm pyright over the same transport
//!   code with no daemon in between;
//! - the same for `lsp call_hierarchy` (its three requests) and `lsp check_edit` (proposal
//!   shown → its diagnostics), as a ratio of the two;
//! - time from SIGKILL of a warm pyright to the next successful answer (restart, re-open,
//!   re-analysis included);
//! - ten conversations on one root → how many server processes, and their RSS;
//! - the newer read ops, each alternating round by round with the same work sent straight to
//!   a second warm server: pyright's `signature_help`, `completions`, `lsp_rename` previewed and
//!   `workspace_diagnostics` (its checker run alone), clangd's `inlay_hints` and `type_hierarchy`.

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;
use common::rss_kib;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolvisor_jsonrpc::{Incoming, Transport, TransportOptions};
use toolvisor_kit::launch::Launcher;
use toolvisor_protocol::client::Client;
use toolvisor_protocol::wire::Outcome;

const N: usize = 200;
/// Calls of each added op (`call_hierarchy`, `check_edit`).
const N_NEW: usize = 50;
/// The C++ file of the clangd part: a class hierarchy and a call with parameter names.
const CPP: &str = "struct Shape {\n    virtual ~Shape() {}\n    virtual double area() const = 0;\n};\nstruct Circle : Shape {\n    double r = 1;\n    double area() const override { return 3 * r * r; }\n};\nstruct Square : Shape {\n    double s = 1;\n    double area() const override { return s * s; }\n};\nint scale(int factor, int offset) { return factor + offset; }\n\nint main() {\n    Circle c;\n    auto r = scale(2, 3);\n    return r + int(c.area());\n}\n";
const SRC: &str = "def greet(name: str) -> str:\n    \"\"\"Say hello.\"\"\"\n    return 'hi ' + name\n\n\nmessage = greet('you')\n";

fn deps() -> PathBuf {
    std::env::var_os("TOOLVISOR_TEST_DEPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.test-deps"))
}

fn client(sock: &Path, workdir: &Path, run: &str) -> Client {
    Client::connect(sock, common::read_options(workdir, run)).expect("connect")
}

fn hover(c: &mut Client, conv: &str) -> Value {
    lsp(
        c,
        conv,
        json!({"op": "hover", "file": "m.py", "line": 6, "symbol": "greet"}),
    )
}

fn lsp(c: &mut Client, conv: &str, args: Value) -> Value {
    match c.call(conv, "lsp", args.clone()).expect("call").outcome {
        Outcome::Ok(v) => v.0,
        Outcome::Err(e) => panic!("lsp {args} failed: {e}"),
    }
}

/// Medians of `n` calls of `args` after 5 warm-ups: (through toolvisor, the server's share
/// as the answer's `server.request_ms` says, per-call difference).
/// `pause` before each measured call lets the server go quiet first (an agent's calls are
/// seconds apart; back to back, each call also waits out the re-analysis the last one caused).
fn measure(
    c: &mut Client,
    n: usize,
    pause: Duration,
    args: Value,
    check: impl Fn(&Value),
) -> (f64, f64, f64) {
    for _ in 0..5 {
        check(&lsp(c, "c0", args.clone()));
    }
    let (mut total, mut server) = (Vec::new(), Vec::new());
    for _ in 0..n {
        std::thread::sleep(pause);
        let s = Instant::now();
        let v = lsp(c, "c0", args.clone());
        total.push(s.elapsed().as_secs_f64() * 1000.0);
        server.push(v["server"]["request_ms"].as_f64().unwrap());
    }
    let added: Vec<f64> = total.iter().zip(&server).map(|(t, s)| t - s).collect();
    (median(total), median(server), median(added))
}

/// `rounds` rounds of `through` (calls through toolvisor) and `direct` (the same work sent
/// straight to the server), each giving its calls' times in ms, alternating which goes first;
/// the medians (through toolvisor, direct).
fn alternate(
    rounds: usize,
    mut through: impl FnMut() -> Vec<f64>,
    mut direct: impl FnMut() -> Vec<f64>,
) -> (f64, f64) {
    let (mut t, mut d) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for daemon_side in [round % 2 == 0, round % 2 != 0] {
            if daemon_side {
                t.extend(through());
            } else {
                d.extend(direct());
            }
        }
    }
    (median(t), median(d))
}

/// `n` runs of `call`; each one's time in ms.
fn timed(n: usize, mut call: impl FnMut()) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let s = Instant::now();
            call();
            s.elapsed().as_secs_f64() * 1000.0
        })
        .collect()
}

/// `program` on PATH.
fn which(program: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH: run scripts/install-test-deps"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A second warm server this process started and talks to directly (no daemon in between),
/// over the same transport code; kept across rounds.
struct Direct {
    rt: tokio::runtime::Runtime,
    rpc: toolvisor_jsonrpc::RpcClient,
    /// `{textDocument, position}` of the hover that says the server is ready.
    params: Value,
    _guard: toolvisor_kit::process::ProcessGuard,
}

/// A server for [`Direct`]: its command, and the one file it opens.
struct Served<'a> {
    program: &'a Path,
    args: &'a [&'a str],
    file: &'a str,
    language: &'a str,
    text: &'a str,
    /// A position whose hover answers once the server has analysed the file.
    ready_at: Value,
}

impl Direct {
    fn start(project: &Path, served: Served) -> Direct {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (rpc, params, guard) = rt.block_on(async {
            let launcher = Launcher::from_current_env(None, &["PATH".into(), "HOME".into()], None);
            let args: Vec<String> = served.args.iter().map(|a| a.to_string()).collect();
            let spec = launcher.spec(&served.program.display().to_string(), &args, project, true, "bench/direct");
            let spawned = toolvisor_kit::process::spawn(spec).await.expect("spawn the server");
            let (rpc, mut incoming) = Transport::start(
                spawned.stdout,
                spawned.stdin.unwrap(),
                spawned.stderr,
                TransportOptions::default(),
            );
            let answer = rpc.clone();
            tokio::spawn(async move {
                while let Some(m) = incoming.recv().await {
                    if let Incoming::Request { id, method, params } = m {
                        let r = if method == "workspace/configuration" {
                            json!(vec![Value::Null; params["items"].as_array().map_or(0, Vec::len)])
                        } else {
                            Value::Null
                        };
                        let _ = answer.respond(id, Ok(r));
                    }
                }
            });
            let root = format!("file://{}", project.display());
            let t = Duration::from_secs(60);
            rpc.request("initialize", json!({"processId": null, "rootUri": root, "capabilities": {},
                "workspaceFolders": [{"uri": root, "name": "bench"}]}), t).await.unwrap();
            rpc.notify("initialized", json!({})).unwrap();
            let uri = format!("{root}/{}", served.file);
            rpc.notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": served.language, "version": 1, "text": served.text}})).unwrap();
            let params = json!({"textDocument": {"uri": uri}, "position": served.ready_at});
            loop {
                let r = rpc.request("textDocument/hover", params.clone(), t).await.unwrap();
                if !r.is_null() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            for _ in 0..20 {
                rpc.request("textDocument/hover", params.clone(), t).await.unwrap();
            }
            (rpc, params, spawned.guard)
        });
        Direct {
            rt,
            rpc,
            params,
            _guard: guard,
        }
    }

    /// `n` requests of `method` at `position` in the open file; their times in ms.
    fn times(&self, method: &str, position: Value, n: usize) -> Vec<f64> {
        let mut params = self.params.clone();
        params["position"] = position;
        self.steps(&[(method, params)], n)
    }

    /// `n` runs of `steps` (requests sent one after the other, each answer awaited); the time
    /// of each run in ms. Every answer must be non-null.
    fn steps(&self, steps: &[(&str, Value)], n: usize) -> Vec<f64> {
        self.rt.block_on(async {
            let t = Duration::from_secs(60);
            let mut times = Vec::new();
            for _ in 0..n {
                let s = Instant::now();
                for (method, params) in steps {
                    let r = self.rpc.request(method, params.clone(), t).await.unwrap();
                    assert!(!r.is_null(), "{method}: {r}");
                }
                times.push(s.elapsed().as_secs_f64() * 1000.0);
            }
            times
        })
    }

    /// One run of `program` in `cwd`, started the way the daemon starts a checker (the same
    /// launcher and environment allowlist); its time in ms to exit with its output read.
    fn run(&self, program: &Path, args: &[&str], cwd: &Path, want: &str) -> f64 {
        use tokio::io::AsyncReadExt;
        self.rt.block_on(async {
            let s = Instant::now();
            let launcher = Launcher::from_current_env(None, &["PATH".into(), "HOME".into()], None);
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            let spec = launcher.spec(
                &program.display().to_string(),
                &args,
                cwd,
                false,
                "bench/checker",
            );
            let mut spawned = toolvisor_kit::process::spawn(spec).await.expect("spawn");
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let _ = tokio::join!(
                spawned.stdout.read_to_end(&mut out),
                spawned.stderr.read_to_end(&mut err)
            );
            let _ = spawned.exit.wait_for(|s| s.is_some()).await;
            assert!(
                String::from_utf8_lossy(&out).contains(want),
                "{}",
                String::from_utf8_lossy(&err)
            );
            s.elapsed().as_secs_f64() * 1000.0
        })
    }

    /// `n` hovers; their times in ms.
    fn hovers(&self, n: usize) -> Vec<f64> {
        self.steps(&[("textDocument/hover", self.params.clone())], n)
    }

    /// The open file's `{uri}`.
    fn doc(&self) -> Value {
        self.params["textDocument"].clone()
    }
}

fn main() {
    let pyright = deps().join("node_modules/.bin/pyright-langserver");
    assert!(
        pyright.exists(),
        "{} is missing: run scripts/install-test-deps",
        pyright.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let project = std::fs::canonicalize(dir.path()).unwrap().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("pyproject.toml"), "").unwrap();
    std::fs::write(project.join("m.py"), SRC).unwrap();
    let sock = dir.path().join("toolvisor.sock");
    let _daemon = common::start_daemon(
        dir.path(),
        &sock,
        &format!(
            "[lsp]\nsearch_path = [{:?}]\n",
            deps().join("node_modules/.bin").display().to_string()
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(Instant::now() < deadline, "daemon did not start");
        std::thread::sleep(Duration::from_millis(20));
    }

    // 1. Hover latency through toolvisor, and the server's share of it, alternating round by
    //    round with the same hover sent straight to a second warm pyright.
    let mut c = client(&sock, &project, "bench");
    for _ in 0..20 {
        hover(&mut c, "c0");
    }
    let direct = Direct::start(
        &project,
        Served {
            program: &pyright,
            args: &["--stdio"],
            file: "m.py",
            language: "python",
            text: SRC,
            ready_at: json!({"line": 5, "character": 10}),
        },
    );
    let rounds: usize = std::env::var("TOOLVISOR_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3)
        .max(3);
    let per_round = N / rounds;
    let (mut total, mut server, mut straight) = (Vec::new(), Vec::new(), Vec::new());
    let mut round_lines = Vec::new();
    let mut round_ratios = Vec::new();
    for round in 0..rounds {
        let load = common::loadavg();
        let daemon_first = round % 2 == 0;
        let (mut t_r, mut s_r) = (Vec::new(), Vec::new());
        for daemon_side in [daemon_first, !daemon_first] {
            if daemon_side {
                for _ in 0..per_round {
                    let s = Instant::now();
                    let v = hover(&mut c, "c0");
                    t_r.push(s.elapsed().as_secs_f64() * 1000.0);
                    s_r.push(v["server"]["request_ms"].as_f64().unwrap());
                }
            } else {
                straight.extend(direct.hovers(per_round));
            }
        }
        let d_r = straight[straight.len() - per_round..].to_vec();
        let ratio = median(t_r.clone()) / median(d_r.clone());
        round_ratios.push(ratio);
        round_lines.push(format!(
            "| {} | {} | {:.2} ms | {:.2} ms | {ratio:.2}× | {load} |",
            round + 1,
            if daemon_first {
                "toolvisor first"
            } else {
                "direct first"
            },
            median(t_r.clone()),
            median(d_r),
        ));
        total.extend(t_r);
        server.extend(s_r);
    }
    let n_hover = total.len();
    let added: Vec<f64> = total.iter().zip(&server).map(|(t, s)| t - s).collect();
    let (through, own, added) = (median(total), median(server), median(added));
    let straight = median(straight);

    // 1b. The hierarchy and check ops, each against the server's own share of it.
    let hierarchy = measure(
        &mut c,
        N_NEW,
        Duration::ZERO,
        json!({"op": "call_hierarchy", "file": "m.py", "line": 1, "symbol": "greet"}),
        |v| assert_eq!(v["incoming_total"], 1, "{v}"),
    );
    let check_args = json!({"op": "check_edit", "file": "m.py", "old_text": "greet('you')", "new_text": "greet(42)"});
    let check = measure(&mut c, N_NEW, Duration::ZERO, check_args.clone(), |v| {
        assert_eq!(v["new"], 1, "{v}")
    });
    let check_spaced = measure(&mut c, 20, Duration::from_secs(1), check_args, |v| {
        assert_eq!(v["new"], 1, "{v}")
    });
    // 1c. The newer read ops that pyright offers, alternating round by round with
    //     the same request sent straight to the second warm pyright.
    let newer_ops = [
        (
            "signature_help",
            json!({"op": "signature_help", "file": "m.py", "line": 6, "symbol": "greet"}),
            "textDocument/signatureHelp",
            json!({"line": 5, "character": 16}),
        ),
        (
            "completions",
            json!({"op": "completions", "file": "m.py", "line": 6, "symbol": "gre"}),
            "textDocument/completion",
            json!({"line": 5, "character": 13}),
        ),
    ];
    let mut newer_lines = Vec::new();
    let row = |name: &str, server: &str, n: usize, (t, d): (f64, f64)| {
        format!(
            "| `{name}` (median of {n}) | {server} | {t:.2} ms | {d:.2} ms | {:.2} ms | {:.2}× |",
            t - d,
            t / d
        )
    };
    for (name, args, method, position) in newer_ops {
        let per = N_NEW / rounds;
        let medians = alternate(
            rounds,
            || {
                timed(per, || {
                    let v = lsp(&mut c, "c0", args.clone());
                    assert!(v["text"].as_str().unwrap().contains("greet"), "{v}");
                })
            },
            || direct.times(method, position.clone(), per),
        );
        newer_lines.push(row(
            &format!("lsp {name}"),
            "pyright",
            per * rounds,
            medians,
        ));
    }
    // `lsp_rename` previewed: `prepareRename`, then the whole edit (`rename`), nothing written.
    let per = N_NEW / rounds;
    let rename = json!({"file": "m.py", "line": 1, "symbol": "greet", "new_name": "welcome", "dry_run": true});
    let at = json!({"textDocument": direct.doc(), "position": {"line": 0, "character": 4}});
    let mut rename_to = at.clone();
    rename_to["newName"] = json!("welcome");
    // A write-surface client (the tool is write tier; a preview asks no approval).
    let mut options = common::read_options(&project, "bench");
    options.surface.max_tier = toolvisor_protocol::wire::Tier::Write;
    let mut writer = Client::connect(&sock, options).expect("connect");
    let medians = alternate(
        rounds,
        || {
            timed(per, || {
                let v = match writer
                    .call("c0", "lsp_rename", rename.clone())
                    .expect("call")
                    .outcome
                {
                    Outcome::Ok(v) => v.0,
                    Outcome::Err(e) => panic!("lsp_rename {rename} failed: {e}"),
                };
                assert_eq!(
                    (&v["dry_run"], &v["edits"]),
                    (&json!(true), &json!(2)),
                    "{v}"
                );
            })
        },
        || {
            direct.steps(
                &[
                    ("textDocument/prepareRename", at.clone()),
                    ("textDocument/rename", rename_to.clone()),
                ],
                per,
            )
        },
    );
    newer_lines.push(row(
        "lsp_rename {dry_run: true}",
        "pyright",
        per * rounds,
        medians,
    ));
    // `workspace_diagnostics`: pyright offers no workspace pull, so the project checker
    // (`pyright --outputjson` in the root) answers; the direct side runs that command.
    let checker = deps().join("node_modules/.bin/pyright");
    let medians = alternate(
        rounds,
        || {
            timed(2, || {
                let v = lsp(&mut c, "c0", json!({"op": "workspace_diagnostics"}));
                assert_eq!(v["source"], "checker", "{v}");
            })
        },
        || {
            (0..2)
                .map(|_| direct.run(&checker, &["--outputjson"], &project, "generalDiagnostics"))
                .collect()
        },
    );
    newer_lines.push(row(
        "lsp workspace_diagnostics",
        "`pyright --outputjson`",
        2 * rounds,
        medians,
    ));
    // clangd offers the two ops pyright lacks: `inlay_hints` and `type_hierarchy` (clangd 14:
    // its own `clangd/inlayHints` and `textDocument/typeHierarchy`, which toolvisor asks then).
    let cproject = std::fs::canonicalize(dir.path()).unwrap().join("cproj");
    std::fs::create_dir_all(&cproject).unwrap();
    std::fs::write(cproject.join("compile_flags.txt"), "-std=c++17\n").unwrap();
    std::fs::write(cproject.join("main.cpp"), CPP).unwrap();
    let mut cc = client(&sock, &cproject, "bench-c");
    let clangd = which("clangd");
    let cdirect = Direct::start(
        &cproject,
        Served {
            program: &clangd,
            args: &[],
            file: "main.cpp",
            language: "cpp",
            text: CPP,
            ready_at: json!({"line": 16, "character": 15}),
        },
    );
    let hints = json!({"op": "inlay_hints", "file": "main.cpp", "line": 17});
    let types = json!({"op": "type_hierarchy", "file": "main.cpp", "line": 1, "symbol": "Shape"});
    for _ in 0..5 {
        lsp(&mut cc, "c1", hints.clone());
        lsp(&mut cc, "c1", types.clone());
    }
    let range = json!({"textDocument": cdirect.doc(), "range": {"start": {"line": 16, "character": 0}, "end": {"line": 16, "character": 25}}});
    let mut legacy =
        json!({"textDocument": cdirect.doc(), "position": {"line": 0, "character": 7}});
    legacy["direction"] = json!(2);
    legacy["resolve"] = json!(1);
    for (name, args, method, params, want) in [
        (
            "inlay_hints",
            hints,
            "clangd/inlayHints",
            range,
            "⟨factor: ⟩2",
        ),
        (
            "type_hierarchy",
            types,
            "textDocument/typeHierarchy",
            legacy,
            "Square",
        ),
    ] {
        let medians = alternate(
            rounds,
            || {
                timed(per, || {
                    let v = lsp(&mut cc, "c1", args.clone());
                    assert!(v["text"].as_str().unwrap().contains(want), "{v}");
                })
            },
            || cdirect.steps(&[(method, params.clone())], per),
        );
        newer_lines.push(row(
            &format!("lsp {name}"),
            "clangd 14",
            per * rounds,
            medians,
        ));
    }

    // The server is back on the disk text: the hover still answers for it.
    assert!(
        hover(&mut c, "c0")["markdown"]
            .as_str()
            .unwrap()
            .contains("greet")
    );

    // 2. SIGKILL of the warm server → next successful answer.
    let mut recover = Vec::new();
    for _ in 0..5 {
        let pid = hover(&mut c, "c0")["server"]["pid"].as_u64().unwrap() as i32;
        let s = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let v = hover(&mut c, "c0");
        recover.push(s.elapsed().as_secs_f64() * 1000.0);
        assert!(v["markdown"].as_str().unwrap().contains("greet"));
        // Past the restart window's backoff, so each kill is measured alike.
        std::thread::sleep(Duration::from_millis(300));
    }

    // 3. Ten conversations (each its own client and run) on one root.
    let mut pids = Vec::new();
    for i in 0..10 {
        let mut ci = client(&sock, &project, &format!("run-{i}"));
        pids.push(
            hover(&mut ci, &format!("conv-{i}"))["server"]["pid"]
                .as_u64()
                .unwrap() as u32,
        );
    }
    pids.sort();
    pids.dedup();
    let rss: u64 = pids.iter().map(|p| rss_kib(*p)).sum();

    println!(
        "| round | order | `lsp hover` through toolvisor, median | direct to pyright, median | ratio | load average |"
    );
    println!("|---|---|---|---|---|---|");
    for line in &round_lines {
        println!("{line}");
    }
    println!();
    let load = common::loadavg();
    println!("| figure | value | load average |");
    println!("|---|---|---|");
    println!("| `lsp hover` through toolvisor (median of {n_hover}) | {through:.2} ms | {load} |");
    println!(
        "| server's share of those calls (request sent → answer parsed, median) | {own:.2} ms | {load} |"
    );
    println!("| added by toolvisor (per-call difference, median) | {added:.2} ms | {load} |");
    println!(
        "| the same hover sent directly to a second warm pyright (median of {n_hover}, alternating round by round with the above) | {straight:.2} ms | {load} |"
    );
    println!(
        "| through toolvisor / direct: median of the {rounds} rounds' ratios (spread) | {} | {load} |",
        common::summary(&round_ratios)
    );
    for (name, (through, own, added)) in [
        (
            format!("`lsp call_hierarchy` (medians of {N_NEW})"),
            hierarchy,
        ),
        (
            format!("`lsp check_edit`, back to back (medians of {N_NEW})"),
            check,
        ),
        (
            "`lsp check_edit`, 1 s apart (medians of 20)".to_string(),
            check_spaced,
        ),
    ] {
        println!(
            "| {name}: through toolvisor / server's share / added | {through:.2} ms / {own:.2} ms / {added:.2} ms ({:.2}×) | {load} |",
            through / own
        );
    }
    println!(
        "| SIGKILL of warm pyright → next successful hover (median of 5; min {:.0}, max {:.0}) | {:.0} ms | {load} |",
        recover.iter().cloned().fold(f64::MAX, f64::min),
        recover.iter().cloned().fold(0.0, f64::max),
        median(recover.clone())
    );
    println!(
        "| ten conversations on one root → server processes | {} (RSS {} MiB) | {load} |",
        pids.len(),
        rss / 1024
    );
    println!();
    println!("| op | server | through toolvisor | direct to the server | added | ratio |");
    println!("|---|---|---|---|---|---|");
    for line in &newer_lines {
        println!("{line}");
    }
}

//! `debug` figures: time from `launch` to stopped-at-breakpoint through a warm toolvisor
//! daemon against the same adapter driven directly by a minimal blocking DAP driver in this
//! file (spawn, initialize, launch, initialized, setBreakpoints, setExceptionBreakpoints,
//! configurationDone, stopped, one stackTrace for where), in the same run; and per-step
//! latency (`step_over` → stopped, with where) both ways. Medians; the ratio is
//! toolvisor / direct.
//!
//! `cargo bench -p toolvisor --bench debug` (needs what `scripts/install-test-deps`
//! installs: debugpy in `.test-deps/venv`, lldb-dap, gcc). Runs per figure
//! `TOOLVISOR_BENCH_RUNS` (default 7 launches, 3×that steps).

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;
use common::Guard;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolvisor_protocol::client::{Client, ClientOptions};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{ClientKind, Outcome, Surface, Tier};

const PY: &str = "total = 0\nfor i in range(100000):\n    total += i\n    total -= 1\n    total += 2\nprint(total)\n";
const C: &str = "#include <stdio.h>\nint main(void) {\n    long total = 0;\n    for (long i = 0; i < 100000; i++) {\n        total += i;\n        total -= 1;\n        total += 2;\n    }\n    printf(\"%ld\\n\", total);\n    return 0;\n}\n";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// A minimal blocking DAP driver: frames over the adapter's stdio, a reader thread.
struct Direct {
    _child: Guard,
    stdin: ChildStdin,
    rx: mpsc::Receiver<Value>,
    seq: i64,
    seen: Vec<Value>,
}

impl Direct {
    fn spawn(program: &Path, args: &[&str], cwd: &Path) -> Direct {
        let mut child = Command::new(program)
            .args(args)
            .current_dir(cwd)
            // The environment toolvisor gives its children (the default allowlist), so the
            // two differ only in the driving.
            .env_clear()
            .envs(std::env::vars().filter(|(k, _)| {
                toolvisor_kit::launch::DEFAULT_ENV_ALLOWLIST.contains(&k.as_str())
            }))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the adapter");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            loop {
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; len];
                if stdout.read_exact(&mut body).is_err() {
                    return;
                }
                if let Ok(v) = serde_json::from_slice::<Value>(&body)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        Direct {
            _child: Guard(child),
            stdin,
            rx,
            seq: 0,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, command: &str, arguments: Value) -> i64 {
        self.seq += 1;
        let body = serde_json::to_vec(&json!({"seq": self.seq, "type": "request", "command": command, "arguments": arguments})).unwrap();
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend(body);
        self.stdin.write_all(&frame).unwrap();
        self.stdin.flush().unwrap();
        self.seq
    }

    /// The first message (seen or coming) that `pred` accepts; it is consumed.
    fn wait(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.seen.iter().position(&pred) {
            return self.seen.remove(i);
        }
        loop {
            let v = self
                .rx
                .recv_timeout(Duration::from_secs(60))
                .expect("the adapter answered");
            if pred(&v) {
                return v;
            }
            self.seen.push(v);
        }
    }

    fn answer(&mut self, seq: i64) -> Value {
        self.wait(|m| m["type"] == "response" && m["request_seq"] == seq)
    }

    fn stopped(&mut self) -> Value {
        self.wait(|m| m["event"] == "stopped")
    }

    /// Where the thread stopped (one stackTrace, as toolvisor does).
    fn top(&mut self, thread: &Value) -> Value {
        let s = self.send(
            "stackTrace",
            json!({"threadId": thread, "startFrame": 0, "levels": 1}),
        );
        self.answer(s)["body"]["stackFrames"][0].clone()
    }
}

/// Launch to stopped-at-breakpoint, driven directly; returns the driver stopped there.
fn direct_launch(
    adapter: &Path,
    adapter_args: &[&str],
    launch: Value,
    source: &Path,
    line: u64,
) -> (Duration, Direct, Value) {
    let started = Instant::now();
    let cwd = source.parent().unwrap();
    let mut d = Direct::spawn(adapter, adapter_args, cwd);
    let s = d.send("initialize", json!({"clientID": "bench", "adapterID": "x", "linesStartAt1": true, "columnsStartAt1": true, "pathFormat": "path"}));
    let caps = d.answer(s)["body"].clone();
    d.send("launch", launch);
    d.wait(|m| m["event"] == "initialized");
    let s = d.send(
        "setBreakpoints",
        json!({"source": {"path": source}, "breakpoints": [{"line": line}]}),
    );
    d.answer(s);
    let defaults: Vec<Value> = caps["exceptionBreakpointFilters"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f["default"] == true)
        .map(|f| f["filter"].clone())
        .collect();
    let s = d.send("setExceptionBreakpoints", json!({"filters": defaults}));
    d.answer(s);
    let s = d.send("configurationDone", json!({}));
    d.answer(s);
    let stop = d.stopped();
    let thread = stop["body"]["threadId"].clone();
    let top = d.top(&thread);
    assert_eq!(top["line"], line, "direct: stopped at the breakpoint");
    (started.elapsed(), d, thread)
}

fn direct_steps(d: &mut Direct, thread: &Value, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let started = Instant::now();
            let s = d.send("next", json!({"threadId": thread}));
            d.answer(s);
            d.stopped();
            d.top(thread);
            started.elapsed()
        })
        .collect()
}

fn call(c: &mut Client, args: Value) -> Value {
    match c
        .call_with("bench", "debug", args.clone(), |_| true)
        .expect("debug call")
        .outcome
    {
        Outcome::Ok(v) => v.0,
        Outcome::Err(e) => panic!("debug {args} failed: {e}"),
    }
}

struct Figures {
    name: &'static str,
    launch_tv: Duration,
    launch_direct: Duration,
    step_tv: Duration,
    step_direct: Duration,
}

#[allow(clippy::too_many_arguments)]
fn measure(
    name: &'static str,
    c: &mut Client,
    program: &Path,
    source: &Path,
    line: u64,
    adapter: &Path,
    adapter_args: &[&str],
    launch: Value,
    runs: usize,
) -> Figures {
    call(
        c,
        json!({"op": "breakpoints", "file": source, "lines": [line]}),
    );
    let (mut tv, mut direct, mut tv_steps, mut direct_steps_all) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // One warm-up each (page cache, interpreter bytecode caches).
    for round in 0..=runs {
        let started = Instant::now();
        let v = call(c, json!({"op": "launch", "program": program}));
        let took = started.elapsed();
        assert_eq!(
            v["stopped"]["frame"]["line"], line,
            "toolvisor: stopped at the breakpoint: {v}"
        );
        for _ in 0..3 {
            let started = Instant::now();
            let v = call(c, json!({"op": "step_over"}));
            assert_eq!(v["state"], "stopped", "{v}");
            if round > 0 {
                tv_steps.push(started.elapsed());
            }
        }
        call(c, json!({"op": "terminate"}));
        let (direct_took, mut d, thread) =
            direct_launch(adapter, adapter_args, launch.clone(), source, line);
        let steps = direct_steps(&mut d, &thread, 3);
        let s = d.send("disconnect", json!({"terminateDebuggee": true}));
        d.answer(s);
        drop(d);
        if round > 0 {
            tv.push(took);
            direct.push(direct_took);
            direct_steps_all.extend(steps);
        }
    }
    Figures {
        name,
        launch_tv: median(tv),
        launch_direct: median(direct),
        step_tv: median(tv_steps),
        step_direct: median(direct_steps_all),
    }
}

fn main() {
    let runs: usize = std::env::var("TOOLVISOR_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(7);
    // The venv's python is a symlink and a venv only by its path: canonicalize the directory.
    let deps = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.test-deps");
    let deps = std::fs::canonicalize(&deps).unwrap_or(deps);
    let python = deps.join("venv/bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import debugpy"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "debugpy missing: run scripts/install-test-deps");
    let lldb_dap: PathBuf = ["lldb-dap", "lldb-dap-19"]
        .iter()
        .flat_map(|n| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(move |d| d.join(n))
                .collect::<Vec<_>>()
        })
        .find(|p| p.is_file())
        .expect("lldb-dap missing: run scripts/install-test-deps");

    let dir = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(work.join("prog.py"), PY).unwrap();
    std::fs::write(work.join("prog.c"), C).unwrap();
    let gcc = Command::new("gcc")
        .args(["-g", "-O0", "-o", "cprog", "prog.c"])
        .current_dir(&work)
        .status()
        .unwrap();
    assert!(gcc.success());
    let sock = work.join("tv.sock");
    let _daemon = common::start_daemon(
        &work,
        &sock,
        &format!(
            "[debug]\nsearch_path = [{:?}]\n",
            python.parent().unwrap().display().to_string()
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut c = loop {
        let options = ClientOptions {
            codec: Codec::Bincode,
            client_kind: ClientKind::Harness,
            workdir: work.display().to_string(),
            surface: Surface {
                max_tier: Tier::Exec,
                approvals: true,
                questions: false,
                bridge_tools: vec![],
            },
            ..ClientOptions::default()
        };
        match Client::connect(&sock, options) {
            Ok(c) => break c,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("the daemon never accepted: {e}"),
        }
    };

    let py = work.join("prog.py");
    let debugpy = measure(
        "debugpy, prog.py",
        &mut c,
        &py,
        &py,
        3,
        &python,
        &["-m", "debugpy.adapter"],
        json!({"program": py, "args": [], "cwd": work, "console": "internalConsole", "python": [python]}),
        runs,
    );
    let cprog = work.join("cprog");
    let lldb = measure(
        "lldb-dap, C (gcc -g)",
        &mut c,
        &cprog,
        &work.join("prog.c"),
        5,
        &lldb_dap,
        &[],
        json!({"program": cprog, "args": [], "cwd": work}),
        runs,
    );
    println!(
        "| adapter | launch → stopped, toolvisor | direct | ratio | step_over → stopped, toolvisor | direct | ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    for f in [debugpy, lldb] {
        println!(
            "| {} | {} | {} | {:.2}× | {} | {} | {:.2}× |",
            f.name,
            ms(f.launch_tv),
            ms(f.launch_direct),
            f.launch_tv.as_secs_f64() / f.launch_direct.as_secs_f64(),
            ms(f.step_tv),
            ms(f.step_direct),
            f.step_tv.as_secs_f64() / f.step_direct.as_secs_f64(),
        );
    }
    println!(
        "(medians of {runs} launches and {} steps each way)",
        runs * 3
    );
}

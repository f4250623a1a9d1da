//! The inference pool against a real llama.cpp server (llama-cpp-python's OpenAI-compatible
//! server from `.test-deps/inference-venv`) loading a real model file: a tiny random-weight
//! llama GGUF that `tests/inference/make_tiny_gguf.py` writes, put in the model store. Load →
//! ready → a completion through the daemon's endpoint with its usage counted → stats per model
//! and day → unload; the idle TTL and loading on demand; a killed server restarted; a crash
//! loop ending `failed` with the server's output; a daemon SIGKILL leaving no server; a
//! too_large model refused; two models at once on distinct ports; streaming passed through.

use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::inference::{
    chat, config, endpoint, make_gguf, put_in_store, request, status_of, wait_state,
};
use toolvisor_tests::{TestDaemon, alive, wait_for};

const READY: Duration = Duration::from_secs(120);

/// A daemon whose store (`<dir>/models`) holds the tiny model as each of `repos`.
fn start(repos: &[&str], inference: &str, rest: &str) -> TestDaemon {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("models");
    let gguf = dir.path().join("tiny.gguf");
    for (i, repo) in repos.iter().enumerate() {
        make_gguf(&gguf, i as u32 + 1);
        let bytes = std::fs::read(&gguf).unwrap();
        put_in_store(&store, repo, "F32", "tiny-f32.gguf", &bytes);
    }
    let cfg = format!(
        "[models]\nstore = {:?}\n{}",
        store.display().to_string(),
        config(inference, rest)
    );
    TestDaemon::start_in(dir, &cfg)
}

fn err(d: &TestDaemon, tool: &str, args: Json) -> toolvisor_protocol::ToolError {
    match d.call("c", tool, args.clone()) {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("{tool} {args} should fail, got {}", v.0),
    }
}

fn port_free(port: u64) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port as u16)).is_err()
}

#[test]
fn load_ready_completion_usage_counted_per_model_and_day_then_unload() {
    let d = start(&["tester/tiny"], "", "");
    let loaded = d.ok(
        "c",
        "load_model",
        json!({"model": "tester/tiny", "context": 512}),
    );
    assert_eq!(loaded["alias"], "tiny", "{loaded}");
    assert_eq!(loaded["state"], "loading", "{loaded}");
    // How far the load is: since the spawn, against the readiness timeout.
    assert!(loaded["loading_ms"].as_u64().is_some(), "{loaded}");
    assert!(loaded["ready_timeout_s"].as_u64().is_some(), "{loaded}");
    assert_eq!(loaded["fit"], "fits", "{loaded}");
    let ready = wait_state(&d, "tiny", "ready", READY);
    let port = ready["port"].as_u64().unwrap();
    let pid = ready["pid"].as_u64().unwrap() as u32;
    assert!(ready["load_ms"].as_u64().is_some(), "{ready}");
    let models = d.ok("c", "list_models", json!({}));
    assert_eq!(models["models"][0]["load_state"], "ready", "{models}");
    assert_eq!(models["models"][0]["alias"], "tiny", "{models}");
    // A model the pool serves is not deleted under it: the refusal names the alias.
    let busy = err(&d, "delete_model", json!({"model": "tester/tiny"}));
    assert_eq!(busy.kind, ErrorKind::Busy, "{busy}");
    assert!(
        busy.hint.contains("unload_model") && busy.message.contains("tiny"),
        "{busy}"
    );

    let listed = request(&endpoint(&d), "GET", "/v1/models", None).json();
    assert_eq!(listed["data"][0]["id"], "tiny", "{listed}");
    let reply = chat(&d, "tiny", 8);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    let usage = body["usage"].clone();
    let prompt = usage["prompt_tokens"].as_u64().unwrap();
    let completion = usage["completion_tokens"].as_u64().unwrap();
    assert!(prompt > 0 && completion > 0, "{body}");

    let stats = d.ok("c", "get_token_usage_stats", json!({}));
    assert_eq!(stats["totals"]["requests"], 1, "{stats}");
    assert_eq!(stats["totals"]["prompt_tokens"], prompt, "{stats}");
    assert_eq!(stats["totals"]["completion_tokens"], completion, "{stats}");
    assert_eq!(stats["per_model"][0]["model"], "tester/tiny", "{stats}");
    assert_eq!(stats["per_day"].as_array().unwrap().len(), 1, "{stats}");
    assert_eq!(stats["per_day_model"][0]["requests"], 1, "{stats}");

    // A model that is not loaded is named in the endpoint's answer.
    let missing = chat(&d, "nope", 4);
    assert_eq!(missing.status, 404, "{}", missing.body);
    assert!(missing.body.contains("nope"), "{}", missing.body);

    let unloaded = d.ok("c", "unload_model", json!({"alias": "tiny"}));
    assert_eq!(unloaded["unloaded"], true, "{unloaded}");
    assert!(status_of(&d, "tiny").is_none());
    assert!(!alive(pid), "the server {pid} outlived unload_model");
    assert!(
        port_free(port),
        "port {port} still answers after unload_model"
    );
    let e = err(&d, "unload_model", json!({"alias": "tiny"}));
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
}

#[test]
fn usage_survives_a_daemon_restart() {
    let mut d = start(&["tester/tiny"], "", "");
    d.ok("c", "load_model", json!({"model": "tester/tiny"}));
    wait_state(&d, "tiny", "ready", READY);
    assert_eq!(chat(&d, "tiny", 4).status, 200);
    assert_eq!(chat(&d, "tiny", 4).status, 200);
    // The book is written off the response path: wait until the file says two.
    let file = d.state_dir().join("inference/usage.json");
    wait_for(
        "the usage file to count two requests",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(&file)
                .ok()
                .filter(|t| t.contains("\"requests\":2"))
        },
    );
    d.stop();
    let cfg = std::fs::read_to_string(d.config_path()).unwrap();
    let cfg = cfg.split_once('\n').unwrap().1.to_string();
    d.spawn(&cfg);
    let stats = d.ok(
        "c",
        "get_token_usage_stats",
        json!({"model": "tester/tiny", "days": 1}),
    );
    assert_eq!(stats["totals"]["requests"], 2, "{stats}");
}

#[test]
fn idle_ttl_unloads_and_a_request_loads_it_again_on_demand() {
    let d = start(&["tester/tiny"], "idle_ttl_s = 2\non_demand = true", "");
    d.ok(
        "c",
        "load_model",
        json!({"model": "tester/tiny", "alias": "t"}),
    );
    let ready = wait_state(&d, "t", "ready", READY);
    let pid = ready["pid"].as_u64().unwrap() as u32;
    let gone = wait_state(&d, "t", "unloaded", Duration::from_secs(30));
    assert!(
        gone["reason"]
            .as_str()
            .unwrap()
            .contains("without a request"),
        "{gone}"
    );
    wait_for("the idle server to exit", Duration::from_secs(10), || {
        (!alive(pid)).then_some(())
    });
    let models = d.ok("c", "list_models", json!({}));
    assert_eq!(models["models"][0]["load_state"], "unloaded", "{models}");
    // On demand: the request starts it again and waits for it.
    let reply = chat(&d, "t", 4);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let again = status_of(&d, "t").unwrap();
    assert_eq!(again["state"], "ready", "{again}");
    assert_ne!(again["pid"].as_u64().unwrap() as u32, pid);
    // A store model never loaded, named by its repo, loads on demand under that name.
    let reply = chat(&d, "tester/tiny", 4);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(status_of(&d, "tester/tiny").unwrap()["state"], "ready");
}

#[test]
fn a_killed_server_restarts_and_a_crash_loop_fails_with_its_output() {
    let d = start(
        &["tester/tiny"],
        "",
        "[restart]\nintensity = 2\nperiod_s = 120\nbackoff_ms = 100\n",
    );
    d.ok("c", "load_model", json!({"model": "tester/tiny"}));
    let first = wait_state(&d, "tiny", "ready", READY);
    let pid = first["pid"].as_u64().unwrap() as u32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let again = wait_for("the killed server to be restarted and ready", READY, || {
        let s = status_of(&d, "tiny")?;
        (s["state"] == "ready" && s["pid"].as_u64() != Some(pid as u64)).then_some(s)
    });
    assert_eq!(again["restarts"], 1, "{again}");
    assert_eq!(chat(&d, "tiny", 4).status, 200);

    // A model file the server cannot load: every start fails, until the policy gives up.
    let store = d.dir.path().join("models");
    put_in_store(
        &store,
        "tester/broken",
        "F32",
        "broken.gguf",
        b"GGUF this is no model",
    );
    d.ok("c", "load_model", json!({"model": "tester/broken"}));
    let failed = wait_state(&d, "broken", "failed", Duration::from_secs(180));
    let error = failed["last_error"].as_str().unwrap();
    assert!(error.contains("the server exited"), "{failed:#}");
    assert!(error.contains("gave up after 2 restarts"), "{failed:#}");
    assert!(
        error.to_ascii_lowercase().contains("failed to load model"),
        "the failure should carry the server's own output: {failed:#}"
    );
    assert!(
        !failed["stderr_tail"].as_array().unwrap().is_empty(),
        "{failed:#}"
    );
    // Its tree node says it failed and why, not the "loading on …" of its last start.
    let node = d
        .tree_node("inference", "broken")
        .unwrap_or_else(|| panic!("broken is not in the tree"));
    let detail = node["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("failed") && !detail.contains("loading on"),
        "{node}"
    );
    let through = chat(&d, "broken", 4);
    assert_eq!(through.status, 503, "{}", through.body);
    d.ok("c", "unload_model", json!({"alias": "broken"}));
    assert!(status_of(&d, "broken").is_none());
    // The healthy one is untouched.
    assert_eq!(status_of(&d, "tiny").unwrap()["state"], "ready");
}

#[test]
fn a_daemon_sigkill_leaves_no_server_running() {
    let mut d = start(&["tester/tiny"], "", "");
    d.ok("c", "load_model", json!({"model": "tester/tiny"}));
    let ready = wait_state(&d, "tiny", "ready", READY);
    let pid = ready["pid"].as_u64().unwrap() as u32;
    let port = ready["port"].as_u64().unwrap();
    d.kill_hard();
    wait_for(
        "the model server to die with the daemon",
        Duration::from_secs(15),
        || (!alive(pid)).then_some(()),
    );
    wait_for("its port to be free", Duration::from_secs(5), || {
        port_free(port).then_some(())
    });
}

#[test]
fn a_drain_stops_the_servers() {
    let mut d = start(&["tester/tiny"], "", "");
    d.ok("c", "load_model", json!({"model": "tester/tiny"}));
    let pid = wait_state(&d, "tiny", "ready", READY)["pid"]
        .as_u64()
        .unwrap() as u32;
    assert!(d.stop().success());
    assert!(
        !alive(pid),
        "the model server {pid} outlived the daemon's drain"
    );
}

#[test]
fn a_too_large_model_is_refused_with_the_numbers() {
    let dir_meminfo = tempfile::tempdir().unwrap();
    let meminfo = dir_meminfo.path().join("meminfo");
    std::fs::write(
        &meminfo,
        "MemTotal:         100 kB\nMemFree:  10 kB\nMemAvailable:      50 kB\n",
    )
    .unwrap();
    let d = start(
        &["tester/tiny"],
        "",
        &format!("[testing]\nmeminfo = {:?}\n", meminfo.display().to_string()),
    );
    let e = err(&d, "load_model", json!({"model": "tester/tiny"}));
    assert_eq!(e.kind, ErrorKind::NotAvailable, "{e}");
    assert!(e.message.contains("too_large"), "{e}");
    assert!(e.message.contains("102400 bytes in all"), "{e}");
    assert!(e.message.contains("51200 available"), "{e}");
    assert!(status_of(&d, "tiny").is_none());
    let e = err(&d, "load_model", json!({"model": "tester/absent"}));
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    // Each model of the store by the shortest name that loads it.
    assert!(e.message.contains("(the store has: tester/tiny)"), "{e}");
}

#[test]
fn two_models_at_once_on_distinct_ports_each_answering_its_own_requests() {
    let d = start(
        &["tester/one", "tester/two"],
        "listen = \"127.0.0.1:0\"",
        "",
    );
    d.ok("c", "load_model", json!({"model": "tester/one"}));
    d.ok(
        "c",
        "load_model",
        json!({"model": "tester/two", "alias": "second"}),
    );
    let one = wait_state(&d, "one", "ready", READY);
    let two = wait_state(&d, "second", "ready", READY);
    assert_ne!(one["port"], two["port"]);
    assert_ne!(one["pid"], two["pid"]);
    for alias in ["one", "second"] {
        let reply = chat(&d, alias, 4);
        assert_eq!(reply.status, 200, "{}", reply.body);
        // llama-cpp-python answers with its --model_alias: the request reached that server.
        assert_eq!(reply.json()["model"], alias, "{}", reply.body);
    }
    let e = err(
        &d,
        "load_model",
        json!({"model": "tester/two", "alias": "one"}),
    );
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    let stats = d.ok("c", "get_token_usage_stats", json!({}));
    assert_eq!(stats["per_model"].as_array().unwrap().len(), 2, "{stats}");
    // The optional loopback listener serves the same endpoint.
    let status = d.ok("c", "get_inference_status", json!({}));
    let url = status["endpoint"]["listen"].as_str().unwrap();
    let addr = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/v1"))
        .unwrap();
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(
        &mut tcp,
        b"GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut tcp, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"second\""), "{answer}");
}

/// A stream comes through as the server writes it: after the first content chunk the server
/// is stopped (SIGSTOP), and its end has not arrived; once it continues, the end and the
/// stream's usage do.
#[test]
fn streaming_passes_through_before_the_server_has_finished() {
    use std::io::BufRead;
    let d = start(&["tester/tiny"], "", "");
    let (pid, s, mut r, mut seen) = stream_until_content(&d, 400);
    let mut line = String::new();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    // Whatever was already on its way may still arrive; the end cannot.
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => seen.push_str(&line),
        }
    }
    let cut = seen.contains("[DONE]");
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert!(
        !cut,
        "the whole stream had arrived before the server was stopped: was it buffered?"
    );
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    while !seen.contains("[DONE]") {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "stream ended without [DONE]"
        );
        seen.push_str(&line);
    }
    drop(r);
    drop(s);
    let stats = wait_for("the stream to be counted", Duration::from_secs(10), || {
        let s = d.ok("c", "get_token_usage_stats", json!({}));
        (s["totals"]["requests"] == 1).then_some(s)
    });
    // llama-cpp-python (0.3) sends no `usage` in a stream, `stream_options` or not, and no
    // timings: the request is counted as one without usage, never as zero tokens used.
    // (llama.cpp's own llama-server says, and its streams are counted exactly:
    // inference_llama_server.rs.)
    assert_eq!(stats["totals"]["requests_without_usage"], 1, "{stats}");
}

/// A server killed in the middle of a stream: the client's stream ends with an OpenAI-style
/// error event naming what happened (not a connection cut short, not a `[DONE]` that would
/// pass an incomplete answer off as whole), and the request counts as one without usage.
#[test]
fn a_server_killed_mid_stream_ends_it_with_an_error_event() {
    use std::io::Read;
    let d = start(&["tester/tiny"], "", "");
    let (pid, _s, mut r, mut seen) = stream_until_content(&d, 1500);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    // The rest, to the end of the response (the endpoint closes it: `connection: close`).
    r.read_to_string(&mut seen)
        .expect("the stream ends, cleanly, after the error event");
    assert!(
        !seen.contains("[DONE]"),
        "an interrupted stream must not end as if whole: {seen}"
    );
    let event = seen
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Json>(d).ok())
        .find(|e| e.get("error").is_some())
        .unwrap_or_else(|| panic!("no error event at the end of the stream: {seen}"));
    assert_eq!(event["error"]["type"], "model_failed", "{event}");
    let message = event["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("broke off the stream") && message.contains("retry"),
        "{event}"
    );
    // The chunked body was terminated properly (its last chunk, size 0).
    assert!(seen.trim_end().ends_with('0'), "{seen:?}");
    let stats = wait_for("the stream to be counted", Duration::from_secs(10), || {
        let s = d.ok("c", "get_token_usage_stats", json!({}));
        (s["totals"]["requests"] == 1).then_some(s)
    });
    assert_eq!(stats["totals"]["requests_without_usage"], 1, "{stats}");
}

/// Load the tiny model, send a stream of `max_tokens` tokens (never the end-of-sequence token:
/// it runs its whole length) and read it up to its first content: the server's pid, the
/// connection, its reader, and what was read so far.
fn stream_until_content(
    d: &TestDaemon,
    max_tokens: u32,
) -> (
    nix::unistd::Pid,
    std::os::unix::net::UnixStream,
    std::io::BufReader<std::os::unix::net::UnixStream>,
    String,
) {
    use std::io::{BufRead, BufReader, Write};
    d.ok("c", "load_model", json!({"model": "tester/tiny"}));
    let ready = wait_state(d, "tiny", "ready", READY);
    let pid = nix::unistd::Pid::from_raw(ready["pid"].as_u64().unwrap() as i32);
    let body = json!({
        "model": "tiny",
        "messages": [{"role": "user", "content": "say hello"}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": true,
        "logit_bias": {"2": -100},
    })
    .to_string();
    let mut s = std::os::unix::net::UnixStream::connect(endpoint(d)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    while !seen.contains("\"content\"") {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "stream ended early: {seen}"
        );
        seen.push_str(&line);
    }
    (pid, s, r, seen)
}

#[test]
fn a_model_that_fits_an_accelerator_is_loaded_with_every_layer_offloaded() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("models");
    let gguf = dir.path().join("tiny.gguf");
    make_gguf(&gguf, 1);
    put_in_store(
        &store,
        "tester/tiny",
        "F32",
        "tiny-f32.gguf",
        &std::fs::read(&gguf).unwrap(),
    );
    // A fake nvidia-smi: one GPU with 8 GiB free. llama-cpp-python's CPU build takes the
    // offload flag and runs on the CPU: the flag is what is checked.
    let path =
        toolvisor_tests::inference::fake_nvidia_smi(dir.path(), "NVIDIA Fake L4, 8192, 8000");
    let cfg = offload_config(&store, &dir.path().join("none"));
    let d = TestDaemon::start_with_env(dir, &cfg, &[("PATH", &path)]);
    let loaded = d.ok(
        "c",
        "load_model",
        json!({"model": "tester/tiny", "context": 512}),
    );
    assert_eq!(loaded["placement"]["label"], "fits_gpu", "{loaded}");
    assert_eq!(
        loaded["placement"]["accelerator"], "NVIDIA Fake L4",
        "{loaded}"
    );
    assert_eq!(loaded["fit"], "fits", "{loaded}");
    assert_eq!(offloaded(&d, "tiny"), "999");
}

/// A model's own settings (`[inference.models."owner/name"]`) give its default context and
/// arguments added to its server's command, after the fit's (the server takes the last
/// `--n_gpu_layers`); `get_inference_status` shows each accelerator's memory in use and where
/// each model was placed.
#[test]
fn a_models_own_settings_reach_its_server_and_status_shows_accelerator_memory_in_use() {
    let (dir, store, _) = eight_in_store();
    let path = toolvisor_tests::inference::fake_nvidia_smi(
        dir.path(),
        "NVIDIA Fake A, 160, 100\nNVIDIA Fake B, 160, 120",
    );
    let cfg = format!(
        "{}[inference.models.\"tester/eight\"]\ncontext = 768\nargs = [\"--n_gpu_layers\", \"3\"]\n",
        offload_config(&store, &dir.path().join("none"))
    );
    let d = TestDaemon::start_with_env(dir, &cfg, &[("PATH", &path)]);
    let loaded = d.ok("c", "load_model", json!({"model": "tester/eight"}));
    assert_eq!(loaded["context"], 768, "the model's own context: {loaded}");
    assert_eq!(loaded["placement"]["label"], "fits_gpu", "{loaded}");
    let ready = wait_state(&d, "eight", "ready", READY);
    let args = server_args(ready["pid"].as_u64().unwrap());
    let ngl: Vec<&str> = args
        .windows(2)
        .filter(|w| w[0] == "--n_gpu_layers")
        .map(|w| w[1].as_str())
        .collect();
    assert_eq!(
        ngl,
        ["999", "3"],
        "the fit's, then the model's own: {args:?}"
    );
    let ctx = args.iter().position(|a| a == "--n_ctx").unwrap();
    assert_eq!(args[ctx + 1], "768", "{args:?}");
    // A context named by load_model wins over the model's own.
    d.ok("c", "unload_model", json!({"alias": "eight"}));
    let asked = d.ok(
        "c",
        "load_model",
        json!({"model": "tester/eight", "context": 512, "alias": "asked"}),
    );
    assert_eq!(asked["context"], 512, "{asked}");

    let status = d.ok("c", "get_inference_status", json!({}));
    let gpus = status["accelerators"].as_array().unwrap();
    assert_eq!(gpus.len(), 2, "{status}");
    assert_eq!(gpus[0]["name"], "NVIDIA Fake A", "{status}");
    assert_eq!(gpus[0]["memory_used_bytes"], 60u64 << 20, "{status}");
    assert_eq!(gpus[1]["memory_used_bytes"], 40u64 << 20, "{status}");
    assert!(
        status["memory"]["total_bytes"].as_u64() > Some(0),
        "{status}"
    );
    let asked = status["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["alias"] == "asked")
        .unwrap_or_else(|| panic!("{status}"));
    assert_eq!(asked["placement"]["label"], "fits_gpu", "{asked}");
    assert!(
        asked["placement"]["need_bytes"].as_u64() > Some(0),
        "{asked}"
    );
}

/// The arguments of the process `pid`.
fn server_args(pid: u64) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap()
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// A temp dir whose model store holds `tester/eight`: 8 layers of width 512 (about 85 MB),
/// from a real GGUF header; the dir, the store and the model's size.
fn eight_in_store() -> (tempfile::TempDir, std::path::PathBuf, u64) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("models");
    let gguf = dir.path().join("eight.gguf");
    let size = toolvisor_tests::inference::make_gguf_sized(&gguf, 3, 8, 512);
    put_in_store(
        &store,
        "tester/eight",
        "F32",
        "eight-f32.gguf",
        &std::fs::read(&gguf).unwrap(),
    );
    (dir, store, size)
}

/// The gguf command of these tests: llama-cpp-python's server with the offload flag.
fn offload_config(store: &std::path::Path, roots: &std::path::Path) -> String {
    let py = toolvisor_tests::inference::python().display().to_string();
    format!(
        "[models]\nstore = {:?}\n[inference]\ncommands.gguf = [{py:?}, \"-m\", \"llama_cpp.server\", \"--model\", \"{{path}}\", \"--host\", \"127.0.0.1\", \"--port\", \"{{port}}\", \"--n_ctx\", \"{{context}}\", \"--model_alias\", \"{{alias}}\", \"--n_gpu_layers\", \"{{gpu_layers}}\"]\n[testing]\naccelerator_roots = {:?}\n",
        store.display().to_string(),
        roots.display().to_string()
    )
}

/// The `--n_gpu_layers` the server process of `alias` was started with.
fn offloaded(d: &TestDaemon, alias: &str) -> String {
    let ready = wait_state(d, alias, "ready", READY);
    let args = server_args(ready["pid"].as_u64().unwrap());
    let at = args
        .iter()
        .position(|a| a == "--n_gpu_layers")
        .unwrap_or_else(|| panic!("{args:?}"));
    args[at + 1].clone()
}

#[test]
fn two_gpus_hold_what_one_cannot_and_a_longer_context_needs_more() {
    // 8 layers of width 512 (about 10.5 MB each, 85 MB in all) from a real GGUF header;
    // the need is the weights, the KV cache of the context and at least 64 MiB of runtime.
    let (dir, store, size) = eight_in_store();
    // Two GPUs with 100 MiB free each: neither holds the ~150 MiB whole, both do.
    let path = toolvisor_tests::inference::fake_nvidia_smi(
        dir.path(),
        "NVIDIA Fake A, 160, 100\nNVIDIA Fake B, 160, 100",
    );
    let cfg = offload_config(&store, &dir.path().join("none"));
    let d = TestDaemon::start_with_env(dir, &cfg, &[("PATH", &path)]);
    let loaded = d.ok(
        "c",
        "load_model",
        json!({"model": "tester/eight", "context": 512}),
    );
    let p = &loaded["placement"];
    assert_eq!(p["label"], "fits_gpu", "{loaded}");
    assert_eq!(
        p["split_over"],
        json!(["NVIDIA Fake A", "NVIDIA Fake B"]),
        "{loaded}"
    );
    assert!(
        p["need_bytes"].as_u64().unwrap() > size + (64 << 20),
        "{loaded}"
    );
    // The context's KV cache: 8 layers × 4 heads × (128 + 128) × 2 bytes per token.
    assert_eq!(p["kv_cache_bytes"], 8 * 4 * 256 * 2 * 512, "{loaded}");
    assert_eq!(offloaded(&d, "eight"), "999");
    d.ok("c", "unload_model", json!({"alias": "eight"}));

    // A longer context needs more: its KV cache is counted.
    let long = d.ok(
        "c",
        "load_model",
        json!({"model": "tester/eight", "context": 4096, "alias": "long"}),
    );
    assert!(
        long["placement"]["need_bytes"].as_u64() > p["need_bytes"].as_u64(),
        "{long} vs {loaded}"
    );
    d.ok("c", "unload_model", json!({"alias": "long"}));
}

#[test]
fn a_gpu_too_small_for_the_model_takes_the_layers_that_fit() {
    let (dir, store, _) = eight_in_store();
    // 90 MiB free: less half the runtime (32 MiB), room for 5 of the 8 layers.
    let path = toolvisor_tests::inference::fake_nvidia_smi(dir.path(), "NVIDIA Fake L4, 96, 90");
    let cfg = offload_config(&store, &dir.path().join("none"));
    let d = TestDaemon::start_with_env(dir, &cfg, &[("PATH", &path)]);
    let loaded = d.ok(
        "c",
        "load_model",
        json!({"model": "tester/eight", "context": 512}),
    );
    let p = &loaded["placement"];
    assert_eq!(p["label"], "fits_partial", "{loaded}");
    assert_eq!(loaded["fit"], "fits", "{loaded}");
    let layers = p["gpu_layers"].as_u64().unwrap();
    assert!((1..8).contains(&layers), "{loaded}");
    assert_eq!(offloaded(&d, "eight"), layers.to_string());
}

#[test]
fn at_max_loaded_the_least_recently_used_model_is_evicted_unless_pinned() {
    let d = start(
        &["tester/one", "tester/two", "tester/three"],
        "max_loaded = 2",
        "",
    );
    for m in ["tester/one", "tester/two"] {
        d.ok("c", "load_model", json!({"model": m, "context": 256}));
    }
    wait_state(&d, "one", "ready", READY);
    wait_state(&d, "two", "ready", READY);
    // `two` is used after `one`: `one` is the least recently used.
    let reply = chat(&d, "two", 4);
    assert_eq!(reply.status, 200, "{reply:?}");
    let loaded = d.ok(
        "c",
        "load_model",
        json!({"model": "tester/three", "context": 256, "pin": true}),
    );
    assert_eq!(loaded["evicted"]["alias"], "one", "{loaded}");
    assert!(
        loaded["evicted"]["why"]
            .as_str()
            .unwrap()
            .contains("least recently used"),
        "{loaded}"
    );
    assert!(status_of(&d, "one").is_none(), "one is still listed");
    wait_state(&d, "three", "ready", READY);
    assert_eq!(status_of(&d, "three").unwrap()["pinned"], true);
    // `two` is evicted for the next load; `three` is pinned and stays.
    let again = d.ok(
        "c",
        "load_model",
        json!({"model": "tester/one", "context": 256, "pin": true}),
    );
    assert_eq!(again["evicted"]["alias"], "two", "{again}");
    wait_state(&d, "one", "ready", READY);
    // Both pinned: nothing can make room, and the refusal says why.
    let e = err(
        &d,
        "load_model",
        json!({"model": "tester/two", "context": 256}),
    );
    assert_eq!(e.kind, ErrorKind::Busy, "{e}");
    assert!(
        e.message.contains("pinned: ") && e.message.contains("one") && e.message.contains("three"),
        "{e}"
    );
    assert_eq!(status_of(&d, "three").unwrap()["state"], "ready");
}

/// The fake `nvidia-smi` the fit tests use answers only the query the daemon makes, so a
/// change of flags, fields or units in the daemon fails those tests instead of passing.
#[test]
fn the_fake_nvidia_smi_answers_only_the_query_the_daemon_makes() {
    let dir = tempfile::tempdir().unwrap();
    let path = toolvisor_tests::inference::fake_nvidia_smi(dir.path(), "GPU A, 81920, 80000");
    let run = |args: &[&str]| {
        std::process::Command::new("nvidia-smi")
            .args(args)
            .env("PATH", &path)
            .output()
            .unwrap()
    };
    let ok = run(&[
        "--query-gpu=name,memory.total,memory.free",
        "--format=csv,noheader,nounits",
    ]);
    assert!(ok.status.success());
    assert_eq!(String::from_utf8_lossy(&ok.stdout), "GPU A, 81920, 80000\n");
    for wrong in [
        &[
            "--query-gpu=name,memory.used",
            "--format=csv,noheader,nounits",
        ][..],
        &["--query-gpu=name,memory.total,memory.free", "--format=csv"][..],
        &["-L"][..],
    ] {
        let out = run(wrong);
        assert_eq!(out.status.code(), Some(2), "{wrong:?}");
        assert!(!out.stderr.is_empty(), "{wrong:?}");
    }
}

/// An alias of the operator's choosing that `unload_model` or an eviction took out is loaded
/// again, as it was, by a request naming it when `[inference] on_demand` is on (it used to be
/// forgotten: 404, while an idle-unloaded alias reloaded).
#[test]
fn a_custom_alias_evicted_or_unloaded_is_loaded_again_on_demand() {
    let d = start(
        &["tester/one", "tester/two"],
        "max_loaded = 1\non_demand = true",
        "",
    );
    d.ok(
        "c",
        "load_model",
        json!({"model": "tester/one", "alias": "mine", "context": 256}),
    );
    wait_state(&d, "mine", "ready", READY);
    let loaded = d.ok(
        "c",
        "load_model",
        json!({"model": "tester/two", "context": 256}),
    );
    assert_eq!(loaded["evicted"]["alias"], "mine", "{loaded}");
    wait_state(&d, "two", "ready", READY);
    let reply = chat(&d, "mine", 4);
    assert_eq!(reply.status, 200, "the evicted alias: {}", reply.body);
    let again = status_of(&d, "mine").unwrap();
    assert_eq!(again["model"], "tester/one", "{again}");
    assert_eq!(again["context"], 256, "{again}");
    d.ok("c", "unload_model", json!({"alias": "mine"}));
    assert!(status_of(&d, "mine").is_none());
    let reply = chat(&d, "mine", 4);
    assert_eq!(reply.status, 200, "the unloaded alias: {}", reply.body);
    assert_eq!(status_of(&d, "mine").unwrap()["model"], "tester/one");
}

/// Without on-demand loading, a request for an evicted alias hears that it was evicted and for
/// what, and how to load it again, not "no model is loaded".
#[test]
fn without_on_demand_an_evicted_alias_says_why_it_is_gone() {
    let d = start(&["tester/one", "tester/two"], "max_loaded = 1", "");
    d.ok(
        "c",
        "load_model",
        json!({"model": "tester/one", "alias": "mine", "context": 256}),
    );
    wait_state(&d, "mine", "ready", READY);
    d.ok(
        "c",
        "load_model",
        json!({"model": "tester/two", "context": 256}),
    );
    let reply = chat(&d, "mine", 4);
    assert_eq!(reply.status, 404, "{}", reply.body);
    assert!(
        reply.body.contains("evicted to make room for \\\"two\\\"")
            && reply.body.contains("tester/one"),
        "{}",
        reply.body
    );
    // The status does not drop it without a word either.
    let status = d.ok("c", "get_inference_status", json!({}));
    let gone = status["gone"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["alias"] == "mine"))
        .unwrap_or_else(|| panic!("the evicted alias is not in the status: {status}"));
    assert_eq!(gone["model"], "tester/one", "{gone}");
    assert!(gone["why"].as_str().unwrap().contains("evicted"), "{gone}");
    assert_eq!(gone["reloads_on_request"], false, "{gone}");
}

//! The inference pool with llama.cpp's own server, `llama-server` (built from the llama.cpp
//! tree of llama-cpp-python's sdist by scripts/build-llama-server into .test-deps), on the tiny
//! GGUF: with no `[inference] commands` it is the default for a gguf model when it is on the
//! daemon's PATH, and every request through the endpoint is counted with exactly the tokens
//! the server reports — a plain answer by its `usage`, a stream by the `usage` event the client
//! asked for or, when it asked for none, by the `timings` llama-server puts in its last event.

use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_tests::inference::{
    endpoint, llama_server_dir, make_gguf, put_in_store, request, stream, wait_state,
};
use toolvisor_tests::{TestDaemon, wait_for};

const READY: Duration = Duration::from_secs(120);

/// A daemon with the tiny model in its store, no inference command configured, and
/// llama-server first on its PATH.
fn start() -> TestDaemon {
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
    let path = format!(
        "{}:{}",
        llama_server_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cfg = format!("[models]\nstore = {:?}\n", store.display().to_string());
    TestDaemon::start_with_env(dir, &cfg, &[("PATH", &path)])
}

/// The totals of `get_token_usage_stats` once `requests` requests are counted.
fn totals_after(d: &TestDaemon, requests: u64) -> Json {
    wait_for(
        &format!("{requests} requests to be counted"),
        Duration::from_secs(10),
        || {
            let t = d.ok("c", "get_token_usage_stats", json!({}))["totals"].clone();
            (t["requests"] == requests).then_some(t)
        },
    )
}

/// The `data:` events of a streamed answer, parsed (without `[DONE]`).
fn events(chunks: &[(std::time::Instant, String)]) -> Vec<Json> {
    let text: String = chunks.iter().map(|(_, c)| c.as_str()).collect();
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty() && *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("event {d:?}: {e}")))
        .collect()
}

#[test]
fn llama_server_is_the_default_and_every_stream_is_counted_with_its_tokens() {
    let d = start();
    d.ok(
        "c",
        "load_model",
        json!({"model": "tester/tiny", "context": 512}),
    );
    let ready = wait_state(&d, "tiny", "ready", READY);
    let pid = ready["pid"].as_u64().unwrap();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(
        exe,
        llama_server_dir()
            .join("llama-server")
            .canonicalize()
            .unwrap(),
        "the default command for a gguf model with llama-server on PATH: {ready:#}"
    );
    let socket = endpoint(&d);
    let body = |extra: Json| {
        let mut b = json!({
            "model": "tiny",
            "messages": [{"role": "user", "content": "say hello world to the test"}],
            "max_tokens": 12,
            "temperature": 0,
            // Never the end-of-sequence token: every answer is max_tokens long.
            "logit_bias": {"2": -100},
        });
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };

    // A plain answer: its usage is the reference.
    let plain = request(
        &socket,
        "POST",
        "/v1/chat/completions",
        Some(&body(json!({}))),
    );
    assert_eq!(plain.status, 200, "{}", plain.body);
    let usage = plain.json()["usage"].clone();
    let prompt = usage["prompt_tokens"].as_u64().unwrap();
    assert!(prompt > 5, "{usage}");
    assert_eq!(usage["completion_tokens"], 12, "{usage}");
    let t = totals_after(&d, 1);
    assert_eq!(
        (t["prompt_tokens"].as_u64(), t["completion_tokens"].as_u64()),
        (Some(prompt), Some(12)),
        "{t}"
    );

    // A stream whose client asked for no usage: the server sent none, only its timings (with
    // most of the prompt now from its cache), and the request still counts every token.
    let (status, chunks) = stream(
        &socket,
        "/v1/chat/completions",
        &body(json!({"stream": true})),
    );
    assert_eq!(status, 200);
    let evs = events(&chunks);
    assert!(
        evs.iter().all(|e| e.get("usage").is_none_or(Json::is_null)),
        "the client asked for no usage: {evs:#?}"
    );
    let timings = evs
        .iter()
        .rev()
        .find_map(|e| e.get("timings"))
        .unwrap_or_else(|| panic!("llama-server's last event has its timings: {evs:#?}"));
    assert!(
        timings["cache_n"].as_u64().unwrap_or(0) > 0,
        "the second request reuses the cached prompt: {timings}"
    );
    let t = totals_after(&d, 2);
    assert_eq!(t["requests_without_usage"], 0, "{t}");
    assert_eq!(
        (t["prompt_tokens"].as_u64(), t["completion_tokens"].as_u64()),
        (Some(2 * prompt), Some(24)),
        "{t}"
    );

    // A stream whose client asked for usage gets it, and the same count is recorded.
    let (status, chunks) = stream(
        &socket,
        "/v1/chat/completions",
        &body(json!({"stream": true, "stream_options": {"include_usage": true}})),
    );
    assert_eq!(status, 200);
    let evs = events(&chunks);
    let asked = evs
        .iter()
        .find_map(|e| e.get("usage").filter(|u| u.is_object()))
        .unwrap_or_else(|| panic!("the client asked for usage: {evs:#?}"));
    assert_eq!(
        (
            asked["prompt_tokens"].as_u64(),
            asked["completion_tokens"].as_u64()
        ),
        (Some(prompt), Some(12)),
        "{asked}"
    );
    let t = totals_after(&d, 3);
    assert_eq!(
        (t["prompt_tokens"].as_u64(), t["completion_tokens"].as_u64()),
        (Some(3 * prompt), Some(36)),
        "{t}"
    );

    // A text completion stream (no chat template) is counted the same way: its tokens are
    // what the same request answered in full says.
    let text = |extra: Json| {
        let mut b = json!({
            "model": "tiny", "prompt": "one two three", "max_tokens": 7,
            "temperature": 0, "logit_bias": {"2": -100},
        });
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let full = request(&socket, "POST", "/v1/completions", Some(&text(json!({}))));
    assert_eq!(full.status, 200, "{}", full.body);
    let u = full.json()["usage"].clone();
    let (p, c) = (
        u["prompt_tokens"].as_u64().unwrap(),
        u["completion_tokens"].as_u64().unwrap(),
    );
    assert_eq!(c, 7, "{u}");
    let (status, _) = stream(&socket, "/v1/completions", &text(json!({"stream": true})));
    assert_eq!(status, 200);
    let t = totals_after(&d, 5);
    assert_eq!(t["requests_without_usage"], 0, "{t}");
    assert_eq!(
        (t["prompt_tokens"].as_u64(), t["completion_tokens"].as_u64()),
        (Some(3 * prompt + 2 * p), Some(36 + 2 * c)),
        "{t}"
    );

    let port = ready["port"].as_u64().unwrap();
    d.ok("c", "unload_model", json!({"alias": "tiny"}));
    wait_for("the port to be free", Duration::from_secs(15), || {
        std::net::TcpStream::connect(("127.0.0.1", port as u16))
            .is_err()
            .then_some(())
    });
}

/// A request that arrives just after the server died (before the pool has seen it go) never
/// reached any server: the endpoint waits for the restarted server and sends it there, so the
/// client gets its answer, not a 502 for a crash it had no part in.
#[test]
fn a_request_right_after_the_server_died_is_answered_by_its_restart() {
    let d = start();
    d.ok("c", "load_model", json!({"model": "tester/tiny"}));
    let first = wait_state(&d, "tiny", "ready", READY);
    let pid = first["pid"].as_u64().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let reply = request(
        &endpoint(&d),
        "POST",
        "/v1/chat/completions",
        Some(&json!({
            "model": "tiny",
            "messages": [{"role": "user", "content": "hello"}],
            "max_tokens": 3,
            "logit_bias": {"2": -100},
        })),
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.json()["usage"]["completion_tokens"],
        3,
        "{}",
        reply.body
    );
    let now = wait_state(&d, "tiny", "ready", READY);
    assert_ne!(now["pid"], first["pid"], "{now:#}");
    assert_eq!(now["restarts"], 1, "{now:#}");
}

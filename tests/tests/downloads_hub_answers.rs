//! The Hub's own answers through `download_model` and `search_huggingface_models`: the test
//! hub answers in the real Hub's field set (`_id`, `id` and `modelId`, `gated`, `cardData`,
//! `gguf`, `safetensors`, …, from `testhub/fixtures/`), a recorded `full=true` search list is
//! read as it is, and each error status the Hub sends (`RepoNotFound` as 401 without a token
//! and 404 with one, `RevisionNotFound`, `EntryNotFound`, `GatedRepo` as 401 and 403, invalid
//! credentials) is reported as what it is.

use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::hf::{HfServer, SEARCH_FULL, pseudo_random};
use toolvisor_tests::{TestDaemon, wait_for};

const RIGHT: &str = "hf_rightrightright1";
const NO_ACCESS: &str = "hf_noaccessnoaccess2";

fn start(hub: &HfServer, token: Option<&str>) -> TestDaemon {
    let token = token
        .map(|t| format!("token = {t:?}\n"))
        .unwrap_or_default();
    TestDaemon::start(&format!(
        "[models]\nendpoint = {:?}\nconnect_timeout_s = 5\nretries = 2\n{token}",
        hub.url()
    ))
}

fn err(d: &TestDaemon, tool: &str, args: Json) -> toolvisor_protocol::ToolError {
    match d.call("c", tool, args.clone()) {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("{tool} {args} should fail, got {}", v.0),
    }
}

fn finished(d: &TestDaemon, id: &str) -> Json {
    wait_for(
        &format!("download job {id} to end"),
        Duration::from_secs(90),
        || {
            let j = d.ok("c", "list_downloads", json!({"job_id": id}))["jobs"][0].clone();
            matches!(j["state"].as_str(), Some("done" | "failed" | "cancelled")).then_some(j)
        },
    )
}

fn gguf(seed: u64, n: usize) -> Vec<u8> {
    let mut b = pseudo_random(seed, n);
    b[..4].copy_from_slice(b"GGUF");
    b
}

/// A GGUF repo, a safetensors repo and a gated repo, each answered in the Hub's shape.
fn three_repos(hub: &HfServer) {
    hub.add_repo(
        "walk/tiny-GGUF",
        vec![
            (".gitattributes", b"*.gguf filter=lfs\n".to_vec(), false),
            ("README.md", b"# tiny\n".to_vec(), false),
            ("tiny-F32.gguf", gguf(1, 200_000), true),
            ("tiny-Q8_0.gguf", gguf(2, 60_000), true),
        ],
        false,
    );
    hub.add_repo(
        "walk/tiny-st",
        vec![
            ("config.json", br#"{"model_type":"qwen2"}"#.to_vec(), false),
            ("tokenizer.json", br#"{"version":"1.0"}"#.to_vec(), false),
            ("model.safetensors", pseudo_random(3, 150_000), true),
        ],
        false,
    );
    hub.add_repo(
        "walk/tiny-gated",
        vec![
            ("config.json", br#"{"model_type":"llama"}"#.to_vec(), false),
            ("model.safetensors", pseudo_random(4, 90_000), true),
            ("original/params.json", b"{}".to_vec(), false),
        ],
        true,
    );
}

#[test]
fn the_hubs_answer_shapes_go_through_download_model_and_search() {
    let hub = HfServer::start(Some(RIGHT));
    three_repos(&hub);
    let d = start(&hub, Some(RIGHT));
    for (repo, variant, files) in [
        ("walk/tiny-GGUF", Some("F32"), vec!["tiny-F32.gguf"]),
        (
            "walk/tiny-st",
            None,
            vec!["config.json", "model.safetensors", "tokenizer.json"],
        ),
        (
            "walk/tiny-gated",
            None,
            vec!["config.json", "model.safetensors", "original/params.json"],
        ),
    ] {
        let started = d.ok(
            "c",
            "download_model",
            json!({"repo": repo, "variant": variant}),
        );
        let mut names: Vec<&str> = started["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, files, "{started}");
        let id = started["job_id"].as_str().unwrap();
        let end = finished(&d, id);
        assert_eq!(end["state"], "done", "{end}\n{}", d.log_text());
    }
    let found = d.ok(
        "c",
        "search_huggingface_models",
        json!({"query": "walk/", "limit": 10}),
    );
    let models = found["models"].as_array().unwrap();
    assert_eq!(models.len(), 3, "{found}");
    let by = |repo: &str| models.iter().find(|m| m["repo"] == repo).unwrap().clone();
    assert_eq!(by("walk/tiny-gated")["gated"], "manual");
    assert_eq!(by("walk/tiny-GGUF")["gated"], false);
    let variants = by("walk/tiny-GGUF")["variants"].clone();
    let f32 = variants
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["variant"] == "F32")
        .unwrap();
    assert_eq!(
        (f32["bytes"].as_u64(), &f32["downloaded"]),
        (Some(200_000), &json!(true))
    );

    // A recorded `full=true` search list, answered as it is: every hit is read; the hits the
    // hub has are sized from their listings, the one it has not keeps its names, size unknown.
    hub.add_repo(
        "TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF",
        vec![
            ("README.md", b"# t\n".to_vec(), false),
            ("tinyllama-1.1b-chat-v1.0.Q2_K.gguf", gguf(5, 30_000), true),
            (
                "tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf",
                gguf(6, 40_000),
                true,
            ),
            ("tinyllama-1.1b-chat-v1.0.Q8_0.gguf", gguf(7, 50_000), true),
        ],
        false,
    );
    hub.add_repo(
        "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        vec![
            ("config.json", b"{}".to_vec(), false),
            ("model.safetensors", pseudo_random(8, 70_000), true),
        ],
        false,
    );
    hub.set_search_answer(Some(SEARCH_FULL));
    let found = d.ok(
        "c",
        "search_huggingface_models",
        json!({"query": "tinyllama", "limit": 10}),
    );
    let repos: Vec<&str> = found["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["repo"].as_str().unwrap())
        .collect();
    assert_eq!(
        repos,
        [
            "TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF",
            "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
            "someone/tinyllama-gated-eval",
            "mlx-community/TinyLlama-1.1B-Chat-v1.0-4bit"
        ],
        "{found}"
    );
    let m = &found["models"];
    let quants: Vec<(&str, u64)> = m[0]["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["variant"].as_str().unwrap(), v["bytes"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        quants,
        [("Q2_K", 30_000), ("Q4_K_M", 40_000), ("Q8_0", 50_000)]
    );
    assert_eq!(m[0]["downloads"], 59712);
    assert_eq!(m[2]["gated"], "auto");
    assert_eq!(m[2]["variants"][0]["variant"], "F16");
    assert_eq!(m[2]["variants"][0]["bytes"], Json::Null);
    assert_eq!(m[2]["variants"][0]["fit"], "unknown");
}

#[test]
fn each_error_status_of_the_hub_is_reported_as_what_it_is() {
    let hub = HfServer::start(Some(RIGHT));
    hub.add_token(NO_ACCESS, false);
    three_repos(&hub);

    // No token: a missing repo is answered 401 RepoNotFound — reported as not found.
    let d = start(&hub, None);
    let e = err(&d, "download_model", json!({"repo": "walk/nope"}));
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(
        e.message
            .contains("repo walk/nope was not found at the endpoint (HTTP 401, RepoNotFound)"),
        "{e}"
    );
    assert!(
        !e.message.contains("gated") && !e.message.contains("private"),
        "{e}"
    );
    let e = err(
        &d,
        "download_model",
        json!({"repo": "walk/tiny-GGUF", "revision": "v9", "variant": "F32"}),
    );
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(
        e.message
            .contains("revision v9 of repo walk/tiny-GGUF was not found at the endpoint (HTTP 404, RevisionNotFound)"),
        "{e}"
    );
    // A gated repo's listing is public; the access check says it is gated, before any job.
    let e = err(&d, "download_model", json!({"repo": "walk/tiny-gated"}));
    assert_eq!(e.kind, ErrorKind::PolicyDenied, "{e}");
    assert!(
        e.message
            .contains("repo walk/tiny-gated is gated (HTTP 401, GatedRepo)")
            && e.message.contains("no token is configured")
            && e.message.contains("Please log in"),
        "{e}"
    );
    assert_eq!(
        d.ok("c", "list_downloads", json!({}))["jobs"],
        json!([]),
        "no job for a repo that cannot be read"
    );
    assert_eq!(hub.served("walk/tiny-gated", "model.safetensors"), 0);
    // A file that left the repo after its listing was read: the job fails naming it, once.
    hub.entry_gone("walk/tiny-GGUF", "tiny-Q8_0.gguf");
    let id = d.ok(
        "c",
        "download_model",
        json!({"repo": "walk/tiny-GGUF", "variant": "Q8_0"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let end = finished(&d, &id);
    assert_eq!(end["state"], "failed", "{end}");
    assert!(
        end["error"].as_str().unwrap().contains(
            "file tiny-Q8_0.gguf of repo walk/tiny-GGUF at revision main was not found at the endpoint (HTTP 404, EntryNotFound)"
        ),
        "{end}"
    );
    assert_eq!(
        hub.starts("walk/tiny-GGUF", "tiny-Q8_0.gguf"),
        [0],
        "a missing file is not retried"
    );
    drop(d);

    // A token the hub knows, without access to gated repos: a missing repo is 404, the gated
    // one 403 GatedRepo naming the token's account.
    let d = start(&hub, Some(NO_ACCESS));
    let e = err(&d, "download_model", json!({"repo": "walk/nope"}));
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(e.message.contains("(HTTP 404, RepoNotFound)"), "{e}");
    let e = err(&d, "download_model", json!({"repo": "walk/tiny-gated"}));
    assert_eq!(e.kind, ErrorKind::PolicyDenied, "{e}");
    assert!(
        e.message.contains("is gated (HTTP 403, GatedRepo)")
            && e.message.contains("not on its authorized list"),
        "{e}"
    );
    assert!(e.hint.contains("accept the terms"), "{e}");
    assert!(!e.to_string().contains(NO_ACCESS), "{e}");
    drop(d);

    // A token the hub does not know: every endpoint says invalid credentials, search too.
    let d = start(&hub, Some("hf_notknownnotknown3"));
    for (tool, args) in [
        ("download_model", json!({"repo": "walk/tiny-st"})),
        ("search_huggingface_models", json!({"query": "walk"})),
    ] {
        let e = err(&d, tool, args);
        assert_eq!(e.kind, ErrorKind::PolicyDenied, "{tool}: {e}");
        assert!(
            e.message.contains("invalid credentials (HTTP 401)"),
            "{tool}: {e}"
        );
    }
}

#[test]
fn a_redirect_to_another_local_port_is_refused_and_a_relative_one_followed() {
    // Another service of this machine, on a loopback port the hub is not on: it must never
    // hear from the daemon, whatever the hub answers.
    let victim = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    victim.set_nonblocking(true).unwrap();
    let victim_port = victim.local_addr().unwrap().port();
    let hub = HfServer::start(None);
    hub.add_repo(
        "walk/redirected",
        vec![("redirected-F32.gguf", gguf(7, 50_000), true)],
        false,
    );
    hub.add_repo(
        "walk/relative",
        vec![("relative-F32.gguf", gguf(8, 50_000), true)],
        false,
    );
    let d = start(&hub, None);

    hub.redirect_next(
        "walk/redirected",
        "redirected-F32.gguf",
        &format!("http://127.0.0.1:{victim_port}/steal"),
    );
    let started = d.ok("c", "download_model", json!({"repo": "walk/redirected"}));
    let end = finished(&d, started["job_id"].as_str().unwrap());
    assert_eq!(end["state"], "failed", "{end}");
    let why = end.to_string();
    assert!(
        why.contains(&format!("127.0.0.1:{victim_port}")) && why.contains("local address"),
        "{end}"
    );
    assert!(
        matches!(victim.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the daemon connected to the other local port"
    );

    // A relative Location stays on the hub's own origin: followed.
    hub.redirect_next(
        "walk/relative",
        "relative-F32.gguf",
        "/walk/relative/resolve/main/relative-F32.gguf",
    );
    let started = d.ok("c", "download_model", json!({"repo": "walk/relative"}));
    let end = finished(&d, started["job_id"].as_str().unwrap());
    assert_eq!(end["state"], "done", "{end}\n{}", d.log_text());
}

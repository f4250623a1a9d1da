//! Download jobs against a Hugging Face-compatible server on loopback (`tests/src/hf.rs`):
//! one job per whole file set, verification, resume after a cut connection, a cancel and a
//! daemon SIGKILL, the errors (404, gated, endpoint down, disk full), policy denial and the
//! fit labels.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{Outcome, Tier};
use toolvisor_tests::hf::{HfServer, sha256_hex};
use toolvisor_tests::inference::fake_nvidia_smi;
use toolvisor_tests::{TestDaemon, wait_for};

const SHARD: usize = 3_000_000;
const REPO: &str = "tester/tiny-gguf";

/// 12 000 kB total, 4 000 kB available: a 9 MB model is `tight`, 1.5 MB `fits`.
const MEMINFO: &str =
    "MemTotal:       12000 kB\nMemFree:         1000 kB\nMemAvailable:    4000 kB\n";

fn config(hub: &HfServer, dir: &std::path::Path, extra: &str) -> String {
    let meminfo = dir.join("meminfo");
    std::fs::write(&meminfo, MEMINFO).unwrap();
    format!(
        "[models]\nendpoint = {:?}\nconnect_timeout_s = 5\nretries = 3\n{extra}\n[testing]\nmeminfo = {:?}\n",
        hub.url(),
        meminfo.display().to_string()
    )
}

fn start(hub: &HfServer, extra: &str) -> TestDaemon {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(hub, dir.path(), extra);
    TestDaemon::start_in(dir, &cfg)
}

fn err(d: &TestDaemon, tool: &str, args: Json) -> toolvisor_protocol::ToolError {
    match d.call("c", tool, args.clone()) {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("{tool} {args} should fail, got {}", v.0),
    }
}

/// The variant `v` of a search hit.
fn variant_of(model: &Json, v: &str) -> Json {
    model["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["variant"] == v)
        .unwrap_or_else(|| panic!("variant {v} in {model}"))
        .clone()
}

fn job(d: &TestDaemon, id: &str) -> Json {
    d.ok("c", "list_downloads", json!({"job_id": id}))["jobs"][0].clone()
}

fn wait_state(d: &TestDaemon, id: &str, state: &str) -> Json {
    wait_for(
        &format!("download job {id} to be {state}"),
        Duration::from_secs(90),
        || {
            let j = job(d, id);
            if j["state"] == "failed" && state != "failed" {
                panic!("job {id} failed: {j}\n{}", d.log_text());
            }
            (j["state"] == state).then_some(j)
        },
    )
}

fn model_dir(d: &TestDaemon, repo: &str) -> PathBuf {
    toolvisor_tests::inference::main_snapshot(&d.state_dir().join("models"), repo)
}

#[test]
fn naming_one_shard_downloads_all_three_as_one_job() {
    let hub = HfServer::start(None);
    let shards = hub.add_gguf_3shard(REPO, SHARD);
    let d = start(&hub, "");
    let started = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": shards[1]}),
    );
    // One job, the whole set, listed in the answer before any byte arrived.
    let names: Vec<&str> = started["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, shards.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(started["bytes_total"], 3 * SHARD as u64);
    assert_eq!(started["variant"], "Q4_K_M");
    let id = started["job_id"].as_str().unwrap().to_string();
    let done = wait_state(&d, &id, "done");
    assert_eq!(done["bytes_done"], 3 * SHARD as u64);
    let dir = model_dir(&d, REPO);
    for (i, name) in shards.iter().enumerate() {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        assert_eq!(bytes.len(), SHARD);
        assert_eq!(done["files"][i]["state"], "done");
        assert_eq!(
            done["files"][i]["sha256"].as_str().unwrap(),
            sha256_hex(&bytes)
        );
        assert!(!dir.join(format!("{name}.part")).exists());
    }
    // The other quantisation was not fetched.
    assert_eq!(hub.served(REPO, "tiny-Q8_0.gguf"), 0);
    // Complete in the store: answered at once, nothing fetched again.
    let again = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "Q4_K_M"}),
    );
    assert_eq!(again["already_complete"], true, "{again}");
    for name in &shards {
        assert_eq!(hub.served(REPO, name), SHARD as u64);
    }
    let models = d.ok("c", "list_models", json!({}));
    let m = &models["models"][0];
    assert_eq!(
        (m["repo"].as_str(), m["complete"].as_bool()),
        (Some(REPO), Some(true))
    );
    assert_eq!(m["size_bytes"], 3 * SHARD as u64);
    assert_eq!(m["fit"], "tight", "{models}");
    assert_eq!(models["orphans"], json!([]), "{models}");
    // A file no model lists is named, with its bytes, for the operator to remove.
    let stray = model_dir(&d, REPO).join("stray.bin");
    std::fs::write(&stray, b"12345").unwrap();
    let shown = stray.strip_prefix(d.state_dir().join("models")).unwrap();
    assert!(
        shown.starts_with("tester--tiny-gguf/snapshots"),
        "{}",
        shown.display()
    );
    let models = d.ok("c", "list_models", json!({}));
    assert_eq!(
        models["orphans"],
        json!([{"path": shown.display().to_string(), "bytes": 5}]),
        "{models}"
    );
    assert_eq!(models["orphan_bytes"], 5, "{models}");
    // delete_model removes the model's files and manifest, and nothing else.
    let deleted = d.ok("c", "delete_model", json!({"model": REPO}));
    assert_eq!(deleted["files_removed"], 3, "{deleted}");
    assert_eq!(deleted["bytes_freed"], 3 * SHARD as u64, "{deleted}");
    for name in &shards {
        assert!(!model_dir(&d, REPO).join(name).exists());
    }
    assert!(
        model_dir(&d, REPO).join("stray.bin").exists(),
        "not the model's"
    );
    let models = d.ok("c", "list_models", json!({}));
    assert_eq!(models["models"], json!([]), "{models}");
    let e = err(&d, "delete_model", json!({"model": REPO}));
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    // The job is a node under the downloads supervisor.
    let node = d
        .tree_node("downloads", &id)
        .unwrap_or_else(|| panic!("job {id} is not in the tree"));
    assert!(node["detail"].as_str().unwrap().contains(REPO), "{node}");
}

#[test]
fn a_safetensors_model_comes_with_config_and_tokenizer() {
    let hub = HfServer::start(None);
    hub.add_safetensors("tester/tiny-st");
    let d = start(&hub, "");
    let started = d.ok("c", "download_model", json!({"repo": "tester/tiny-st"}));
    let mut names: Vec<&str> = started["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json"
        ]
    );
    let id = started["job_id"].as_str().unwrap();
    wait_state(&d, id, "done");
    let dir = model_dir(&d, "tester/tiny-st");
    assert_eq!(
        std::fs::read(dir.join("config.json")).unwrap(),
        br#"{"model_type":"tiny"}"#
    );
    assert_eq!(hub.served("tester/tiny-st", "pytorch_model.bin"), 0);
}

#[test]
fn a_corrupted_file_fails_verification_and_is_fetched_again() {
    let hub = HfServer::start(None);
    let shards = hub.add_gguf_3shard(REPO, SHARD);
    hub.corrupt_next(REPO, &shards[0], 1);
    let d = start(&hub, "");
    let id = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "Q4_K_M"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_state(&d, &id, "done");
    // Fetched twice from the start: the first copy failed its sha256.
    assert_eq!(hub.starts(REPO, &shards[0]), [0, 0]);
    assert_eq!(hub.served(REPO, &shards[0]), 2 * SHARD as u64);
    let bytes = std::fs::read(model_dir(&d, REPO).join(&shards[0])).unwrap();
    assert_eq!(
        sha256_hex(&bytes),
        job(&d, &id)["files"][0]["sha256"].as_str().unwrap()
    );
    assert!(d.log_text().contains("does not match the listed"));
}

#[test]
fn a_file_that_never_matches_fails_saying_what_happened_not_what_will() {
    // The job's error said "the file is fetched again" once it had stopped fetching.
    let hub = HfServer::start(None);
    let shards = hub.add_gguf_3shard(REPO, SHARD);
    hub.corrupt_next(REPO, &shards[0], 10);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&hub, dir.path(), "").replace("retries = 3", "retries = 1");
    let d = TestDaemon::start_in(dir, &cfg);
    let id = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "Q4_K_M"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let failed = wait_state(&d, &id, "failed");
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(error.contains("does not match the listed"), "{failed}");
    assert!(!error.contains("is fetched again"), "{failed}");
    // Its tree node says failed, with no rate or time left from when bytes still came.
    let node = d
        .tree_node("downloads", &id)
        .unwrap_or_else(|| panic!("job {id} is not in the tree"));
    let detail = node["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("failed"), "{node}");
    assert!(
        !detail.contains("/s,") && !detail.contains("left"),
        "{node}"
    );
}

/// The Hub's rate limit (429 with `Retry-After` in seconds) is waited out as asked, not
/// retried at once: the old code tried again after 0.4 and 0.8 s and failed the job after its
/// quick retries.
#[test]
fn a_rate_limit_is_waited_out_as_the_hub_asks() {
    let hub = HfServer::start(None);
    let shards = hub.add_gguf_3shard(REPO, SHARD);
    hub.rate_limit_next(REPO, &shards[0], 2, 2);
    let d = start(&hub, "");
    let id = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "Q4_K_M"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_state(&d, &id, "done");
    let at = hub.arrivals(REPO, &shards[0]);
    assert_eq!(at.len(), 3, "two refused, then the transfer");
    // Each try after a refusal came no sooner than the hub asked (a sleep of at least that
    // long, not a timing of the machine).
    for pair in at.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_secs(2),
            "tried again after {:?}, the hub asked for 2 s",
            pair[1] - pair[0]
        );
    }
    assert_eq!(hub.served(REPO, &shards[0]), SHARD as u64);
}

#[test]
fn a_connection_dropped_mid_file_resumes_from_where_it_stopped() {
    let hub = HfServer::start(None);
    let shards = hub.add_gguf_3shard(REPO, SHARD);
    hub.cut_at(REPO, &shards[1], 1_000_000);
    let d = start(&hub, "");
    let id = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "Q4_K_M"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_state(&d, &id, "done");
    assert_eq!(hub.starts(REPO, &shards[1]), [0, 1_000_000]);
    // Not one byte twice.
    assert_eq!(hub.served(REPO, &shards[1]), SHARD as u64);
    // The log says what broke, not reqwest's layer ("error decoding response body").
    let log = d.log_text();
    assert!(log.contains("the transfer broke after 1000000"), "{log}");
    assert!(!log.contains("error decoding response body"), "{log}");
}

#[test]
fn a_daemon_killed_mid_download_resumes_after_restart_fetching_only_unfinished_bytes() {
    let hub = HfServer::start(None);
    let shards = hub.add_gguf_3shard(REPO, SHARD);
    let stall = 2_500_000u64;
    hub.stall_at(REPO, &shards[2], stall);
    let mut d = start(&hub, "");
    let id = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "Q4_K_M"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_for(
        "shards 1 and 2 verified and shard 3 stalled",
        Duration::from_secs(60),
        || {
            let j = job(&d, &id);
            (hub.stalled() && j["files"][0]["state"] == "done" && j["files"][1]["state"] == "done")
                .then_some(())
        },
    );
    d.kill_hard();
    let part = model_dir(&d, REPO).join(format!("{}.part", shards[2]));
    let on_disk = std::fs::metadata(&part).unwrap().len();
    assert!(on_disk <= stall, "{on_disk}");
    // Restart: the job resumes by itself, under the same id.
    let cfg = std::fs::read_to_string(d.config_path()).unwrap();
    let cfg = cfg.split_once('\n').unwrap().1.to_string();
    d.spawn(&cfg);
    let done = wait_state(&d, &id, "done");
    assert_eq!(done["bytes_done"], 3 * SHARD as u64);
    // Verified shards were not fetched again; shard 3 only from what was on disk.
    assert_eq!(hub.served(REPO, &shards[0]), SHARD as u64);
    assert_eq!(hub.served(REPO, &shards[1]), SHARD as u64);
    assert_eq!(hub.starts(REPO, &shards[2]), [0, on_disk]);
    assert_eq!(
        hub.served(REPO, &shards[2]),
        stall + (SHARD as u64 - on_disk)
    );
    let bytes = std::fs::read(model_dir(&d, REPO).join(&shards[2])).unwrap();
    assert_eq!(
        sha256_hex(&bytes),
        done["files"][2]["sha256"].as_str().unwrap()
    );
    assert!(
        d.log_text()
            .contains("resuming a download job after a restart")
    );
}

#[test]
fn a_cancelled_job_keeps_its_partial_files_and_a_new_call_resumes_them() {
    let hub = HfServer::start(None);
    let shards = hub.add_gguf_3shard(REPO, SHARD);
    hub.stall_at(REPO, &shards[0], 2_000_000);
    let d = start(&hub, "");
    let id = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "Q4_K_M"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    // Every byte before the stall on disk (a file's bytes_done counts written bytes).
    wait_for(
        "shard 1 stalled with its first 2 MB written",
        Duration::from_secs(60),
        || (hub.stalled() && job(&d, &id)["files"][0]["bytes_done"] == 2_000_000).then_some(()),
    );
    let cancelled = d.ok("c", "cancel_download", json!({"job_id": id}));
    assert_eq!(cancelled["state"], "cancelled");
    assert_eq!(job(&d, &id)["state"], "cancelled");
    let part = model_dir(&d, REPO).join(format!("{}.part", shards[0]));
    let kept = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
    assert_eq!(
        kept,
        2_000_000,
        "the bytes before the stall are kept in {}",
        part.display()
    );
    // The same set again: a new job that starts shard 1 from the kept bytes.
    let again = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "Q4_K_M"}),
    );
    let id2 = again["job_id"].as_str().unwrap().to_string();
    assert_ne!(id2, id);
    wait_state(&d, &id2, "done");
    assert_eq!(hub.starts(REPO, &shards[0]), [0, kept]);
    assert_eq!(job(&d, &id)["state"], "cancelled");
    hub.release();
}

#[test]
fn errors_name_the_repo_the_revision_the_token_and_the_bytes() {
    let hub = HfServer::start(Some("hf_righttoken123"));
    hub.add_gguf_3shard(REPO, 1000);
    hub.add_repo(
        "tester/gated",
        vec![("g-Q4_0.gguf", vec![7u8; 100], true)],
        true,
    );
    let d = start(&hub, "");
    let e = err(&d, "download_model", json!({"repo": "tester/nope"}));
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(e.message.contains("tester/nope"), "{e}");
    let e = err(
        &d,
        "download_model",
        json!({"repo": REPO, "revision": "v9"}),
    );
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(e.message.contains("revision v9"), "{e}");
    let e = err(&d, "download_model", json!({"repo": "tester/gated"}));
    assert_eq!(e.kind, ErrorKind::PolicyDenied, "{e}");
    assert!(
        e.message.contains("HTTP 401") && e.message.contains("no token is configured"),
        "{e}"
    );
    assert!(e.hint.contains("HF_TOKEN"), "{e}");
    let e = err(&d, "download_model", json!({"repo": "../etc"}));
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    let e = err(&d, "download_model", json!({"repo": REPO}));
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(
        e.message.contains("Q4_K_M") && e.message.contains("Q8_0"),
        "{e}"
    );
    // Disk full is found before anything starts, naming the store and the bytes.
    hub.list_size(REPO, "tiny-Q8_0.gguf", 1 << 60);
    let e = err(
        &d,
        "download_model",
        json!({"repo": REPO, "variant": "Q8_0"}),
    );
    assert_eq!(e.kind, ErrorKind::Io, "{e}");
    assert!(
        e.message
            .contains(&format!("{} bytes still to fetch", 1u64 << 60)),
        "{e}"
    );
    assert!(
        e.message
            .contains(&d.state_dir().join("models").display().to_string()),
        "{e}"
    );
    assert_eq!(hub.served(REPO, "tiny-Q8_0.gguf"), 0);
    drop(d);

    // A token the hub does not know, from the environment: refused as invalid credentials
    // (HTTP 401, as the Hub answers), naming the configured token; masked.
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&hub, dir.path(), "");
    let d = TestDaemon::start_with_env(dir, &cfg, &[("HF_TOKEN", "hf_wrongtoken999")]);
    let e = err(&d, "download_model", json!({"repo": "tester/gated"}));
    assert_eq!(e.kind, ErrorKind::PolicyDenied, "{e}");
    assert!(
        e.message.contains("HTTP 401")
            && e.message.contains("invalid credentials")
            && e.message.contains("configured token"),
        "{e}"
    );
    assert!(!e.to_string().contains("hf_wrongtoken999"), "{e}");
    drop(d);

    // The right token in `[models]`: the gated model downloads, and the token never shows.
    let d = start(&hub, "token = \"hf_righttoken123\"\n");
    let id = d.ok("c", "download_model", json!({"repo": "tester/gated"}))["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_state(&d, &id, "done");
    let echoed = d.ok("c", "bash", json!({"command": "echo hf_righttoken123"}));
    assert!(!echoed.to_string().contains("hf_righttoken123"), "{echoed}");
    assert!(!d.log_text().contains("hf_righttoken123"));
}

#[test]
fn an_unreachable_endpoint_is_network_unavailable_and_local_tools_keep_working() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let d = TestDaemon::start(&format!(
        "[models]\nendpoint = \"http://127.0.0.1:{port}\"\nconnect_timeout_s = 600\n"
    ));
    for (tool, args) in [
        ("download_model", json!({"repo": REPO, "variant": "Q4_K_M"})),
        ("search_huggingface_models", json!({"query": "tiny"})),
    ] {
        let e = err(&d, tool, args);
        assert_eq!(e.kind, ErrorKind::NetworkUnavailable, "{tool}: {e}");
        assert!(e.message.contains(&format!("127.0.0.1:{port}")), "{e}");
        assert!(e.hint.contains("list_models"), "{e}");
    }
    assert_eq!(d.ok("c", "list_models", json!({}))["models"], json!([]));
    assert_eq!(d.ok("c", "list_downloads", json!({}))["jobs"], json!([]));
}

#[test]
fn policy_can_deny_the_network_tools_one_by_one_and_hides_them() {
    let hub = HfServer::start(None);
    hub.add_safetensors("tester/tiny-st");
    let d = start(
        &hub,
        "[policy]\ndeny = [\"download_model\", \"search_huggingface_models\"]\n",
    );
    let c = d.client(Codec::Json, Tier::Exec, true);
    let names: Vec<&str> = c.welcome().tools.iter().map(|t| t.name.as_str()).collect();
    assert!(!names.contains(&"download_model") && !names.contains(&"search_huggingface_models"));
    for t in ["list_models", "list_downloads", "cancel_download"] {
        assert!(names.contains(&t), "{t} in {names:?}");
    }
    let e = err(&d, "download_model", json!({"repo": "tester/tiny-st"}));
    assert_eq!(e.kind, ErrorKind::PolicyDenied);
    assert_eq!(d.ok("c", "list_models", json!({}))["models"], json!([]));
    assert_eq!(hub.served("tester/tiny-st", "model.safetensors"), 0);
    drop(d);
    // Denying one leaves the other.
    let d = start(&hub, "[policy]\ndeny = [\"download_model\"]\n");
    let found = d.ok("c", "search_huggingface_models", json!({"query": "tiny"}));
    assert_eq!(found["models"][0]["repo"], "tester/tiny-st");
}

#[test]
fn fit_labels_come_from_the_machines_memory_in_search_and_list_models() {
    let hub = HfServer::start(None);
    hub.add_gguf_3shard(REPO, SHARD);
    hub.add_safetensors("tester/tiny-st");
    hub.add_repo(
        "tester/huge-gguf",
        vec![("huge-Q4_0.gguf", vec![1u8; 10], true)],
        false,
    );
    hub.list_size("tester/huge-gguf", "huge-Q4_0.gguf", 20_000_000);
    let d = start(&hub, "");
    let found = d.ok(
        "c",
        "search_huggingface_models",
        json!({"query": "tester/", "limit": 10}),
    );
    let by_repo = |repo: &str| {
        found["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["repo"] == repo)
            .unwrap_or_else(|| panic!("{repo} in {found}"))
            .clone()
    };
    let gguf = by_repo(REPO);
    let variant = |v: &str| variant_of(&gguf, v);
    // 9 MB of Q4_K_M needs 10.8 MB: only in total memory. 1.5 MB of Q8_0 fits what is free.
    assert_eq!(variant("Q4_K_M")["fit"], "tight");
    assert_eq!(variant("Q4_K_M")["bytes"], 3 * SHARD as u64);
    assert_eq!(variant("Q8_0")["fit"], "fits");
    assert_eq!(gguf["fit"], "fits");
    assert_eq!(by_repo("tester/huge-gguf")["fit"], "too_large");
    assert_eq!(by_repo("tester/tiny-st")["fit"], "fits");
    let limited = d.ok(
        "c",
        "search_huggingface_models",
        json!({"query": "tester/", "limit": 1}),
    );
    assert_eq!(limited["models"].as_array().unwrap().len(), 1);
    let id = d.ok("c", "download_model", json!({"repo": "tester/tiny-st"}))["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_state(&d, &id, "done");
    let models = d.ok("c", "list_models", json!({}));
    assert_eq!(models["models"][0]["fit"], "fits");
    assert_eq!(models["memory"]["total_bytes"], 12_000 * 1024);
}

#[test]
fn jobs_wait_for_a_transfer_slot_as_queued_and_ended_jobs_are_forgotten_after_keep_finished() {
    let hub = HfServer::start(None);
    let shards = hub.add_gguf_3shard(REPO, SHARD);
    hub.add_safetensors("tester/tiny-st");
    hub.stall_at(REPO, &shards[0], 1_000_000);
    let d = start(&hub, "parallel_transfers = 1\nkeep_finished_s = 0\n");
    let first = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "Q4_K_M"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_for("the first shard stalled", Duration::from_secs(60), || {
        hub.stalled().then_some(())
    });
    let second = d.ok("c", "download_model", json!({"repo": "tester/tiny-st"}))["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    // One slot, held by the first job: the second waits, and says so.
    let waiting = job(&d, &second);
    assert_eq!(waiting["state"], "queued", "{waiting}");
    assert!(
        waiting["files"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["state"] == "queued")
    );
    assert_eq!(job(&d, &first)["state"], "downloading");
    hub.release();
    // keep_finished_s = 0: an ended job may leave the list within a second, so its end is
    // read from the store (both models complete), then the list must empty.
    wait_for(
        "both models complete in the store",
        Duration::from_secs(90),
        || {
            let models = d.ok("c", "list_models", json!({}))["models"].clone();
            let models = models.as_array().unwrap();
            (models.len() == 2 && models.iter().all(|m| m["complete"] == true)).then_some(())
        },
    );
    wait_for("ended jobs forgotten", Duration::from_secs(30), || {
        let jobs = d.ok("c", "list_downloads", json!({}))["jobs"].clone();
        jobs.as_array().unwrap().is_empty().then_some(())
    });
    let records = d.state_dir().join("downloads").join("jobs");
    assert_eq!(std::fs::read_dir(records).unwrap().count(), 0);
    for id in [&first, &second] {
        let e = err(&d, "list_downloads", json!({"job_id": id}));
        assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    }
}

#[test]
fn a_range_answered_from_the_wrong_offset_is_refused_even_without_a_hash() {
    let hub = HfServer::start(None);
    let bytes = toolvisor_tests::hf::pseudo_random(77, 2_000_000);
    // Listed without a hash: only the size would be checked.
    hub.add_repo(
        "tester/nohash",
        vec![("plain-Q4_0.gguf", bytes.clone(), false)],
        false,
    );
    hub.cut_at("tester/nohash", "plain-Q4_0.gguf", 1_000_000);
    hub.misrange_next("tester/nohash", "plain-Q4_0.gguf");
    let d = start(&hub, "");
    let id = d.ok("c", "download_model", json!({"repo": "tester/nohash"}))["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_state(&d, &id, "done");
    // Cut at 1 MB, resumed from there, answered from byte 0: refused, fetched again whole.
    assert_eq!(
        hub.starts("tester/nohash", "plain-Q4_0.gguf"),
        [0, 1_000_000, 0]
    );
    let got = std::fs::read(model_dir(&d, "tester/nohash").join("plain-Q4_0.gguf")).unwrap();
    assert!(got == bytes, "the file in place is the served file");
}

#[test]
fn a_finished_job_shows_done_after_a_restart_whatever_the_store_holds_since() {
    let hub = HfServer::start(None);
    let shards = hub.add_gguf_3shard(REPO, SHARD);
    let mut d = start(&hub, "");
    let args = json!({"repo": REPO, "variant": "Q4_K_M"});
    let first = d.ok("c", "download_model", args.clone())["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_state(&d, &first, "done");
    // The operator deletes the model (docs/OPERATIONS.md), then a new download of it is
    // cancelled at a third of its first shard: its `.part` files stay.
    std::fs::remove_dir_all(model_dir(&d, REPO)).unwrap();
    hub.stall_at(REPO, &shards[0], 1_000_000);
    let second = d.ok("c", "download_model", args)["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_for("the new download stalled", Duration::from_secs(60), || {
        hub.stalled().then_some(())
    });
    // A model being downloaded is not deleted under its job.
    let busy = err(&d, "delete_model", json!({"model": REPO}));
    assert_eq!(busy.kind, ErrorKind::Busy, "{busy}");
    assert!(busy.hint.contains(second.as_str()), "{busy}");
    d.ok("c", "cancel_download", json!({"job_id": second}));
    hub.release();
    d.stop();
    let cfg = std::fs::read_to_string(d.config_path()).unwrap();
    d.spawn(cfg.split_once('\n').unwrap().1);
    // The first job verified every file: it says so, not what the store holds now.
    let j = job(&d, &first);
    assert_eq!(
        (j["state"].as_str(), j["percent"].as_f64()),
        (Some("done"), Some(100.0)),
        "{j}"
    );
    assert_eq!(j["bytes_done"], 3 * SHARD as u64, "{j}");
    for f in j["files"].as_array().unwrap() {
        assert_eq!(f["state"], "done", "{j}");
        assert_eq!(f["bytes_done"], SHARD as u64, "{j}");
    }
    // The cancelled one keeps what it had.
    let j = job(&d, &second);
    assert_eq!(j["state"], "cancelled", "{j}");
    assert!(j["bytes_done"].as_u64().unwrap() < 3 * SHARD as u64, "{j}");
    // What the store holds is list_models' to say: the model is not complete.
    let models = d.ok("c", "list_models", json!({}));
    assert_eq!(models["models"][0]["complete"], false, "{models}");
    // Job ids go on across a clean restart: the next is dl3, not one a block of 64 further.
    assert_eq!((first.as_str(), second.as_str()), ("dl1", "dl2"));
    let third = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "Q4_K_M"}),
    );
    assert_eq!(third["job_id"], "dl3", "{third}");
}

#[test]
fn an_accelerator_with_room_is_where_a_model_fits() {
    let hub = HfServer::start(None);
    hub.add_gguf_3shard(REPO, SHARD);
    let dir = tempfile::tempdir().unwrap();
    // 24 MiB of GPU memory, 20 free: the 9 MB Q4_K_M (10.8 MB needed), `tight` in system
    // memory, fits the GPU. An AMD card with 8 MB, 1 MB of it used, reported by sysfs.
    let path = fake_nvidia_smi(dir.path(), "NVIDIA Fake L4, 24, 20");
    let card = dir.path().join("accel/drm/card0/device");
    std::fs::create_dir_all(&card).unwrap();
    std::fs::write(card.join("mem_info_vram_total"), "8000000\n").unwrap();
    std::fs::write(card.join("mem_info_vram_used"), "1000000\n").unwrap();
    let meminfo = dir.path().join("meminfo");
    std::fs::write(&meminfo, MEMINFO).unwrap();
    let cfg = format!(
        "[models]\nendpoint = {:?}\nconnect_timeout_s = 5\n[testing]\nmeminfo = {:?}\naccelerator_roots = {:?}\n",
        hub.url(),
        meminfo.display().to_string(),
        dir.path().join("accel").display().to_string()
    );
    let d = TestDaemon::start_with_env(dir, &cfg, &[("PATH", &path)]);
    let found = d.ok(
        "c",
        "search_huggingface_models",
        json!({"query": "tester/"}),
    );
    assert_eq!(
        found["accelerators"],
        json!([
            {"kind": "nvidia", "name": "NVIDIA Fake L4", "memory_total_bytes": 24 << 20, "memory_free_bytes": 20 << 20},
            {"kind": "amd", "name": "AMD GPU (card0)", "memory_total_bytes": 8_000_000, "memory_free_bytes": 7_000_000}
        ]),
        "{found}"
    );
    let gguf = &found["models"][0];
    let variant = |v: &str| variant_of(gguf, v);
    let q4 = variant("Q4_K_M");
    assert_eq!(q4["placement"]["label"], "fits_gpu", "{q4}");
    assert_eq!(q4["placement"]["accelerator"], "NVIDIA Fake L4", "{q4}");
    assert_eq!(q4["fit"], "fits", "the seed's label: {q4}");
    assert_eq!(gguf["placement"], "fits_gpu", "{gguf}");
    // The same model, no accelerator: tight, as the CPU-only test says.
    let id = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "Q4_K_M"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_state(&d, &id, "done");
    let models = d.ok("c", "list_models", json!({}));
    assert_eq!(
        models["models"][0]["placement"]["label"], "fits_gpu",
        "{models}"
    );
    assert_eq!(
        models["accelerators"].as_array().unwrap().len(),
        2,
        "{models}"
    );
}

#[test]
fn a_broken_nvidia_smi_leaves_the_cpu_label() {
    let hub = HfServer::start(None);
    hub.add_gguf_3shard(REPO, SHARD);
    let dir = tempfile::tempdir().unwrap();
    let path = fake_nvidia_smi(
        dir.path(),
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
    );
    let cfg = config(&hub, dir.path(), "");
    let cfg = cfg.replace(
        "[testing]\n",
        &format!(
            "[testing]\naccelerator_roots = {:?}\n",
            dir.path().join("none").display().to_string()
        ),
    );
    let d = TestDaemon::start_with_env(dir, &cfg, &[("PATH", &path)]);
    let found = d.ok(
        "c",
        "search_huggingface_models",
        json!({"query": "tester/"}),
    );
    assert_eq!(found["accelerators"], json!([]), "{found}");
    let q4 = variant_of(&found["models"][0], "Q4_K_M");
    assert_eq!(
        (&q4["fit"], &q4["placement"]["label"]),
        (&json!("tight"), &json!("tight")),
        "{q4}"
    );
}

#[test]
fn a_hub_trickling_below_the_minimum_rate_fails_the_file_naming_the_rate_and_frees_the_slot() {
    let hub = HfServer::start(None);
    hub.add_safetensors("tester/trickle-st");
    hub.add_safetensors("tester/tiny-st");
    // A hundred bytes a second, a dozen at a time: never silent long enough to be a stall.
    hub.set_rate(100);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &hub,
        dir.path(),
        "parallel_transfers = 1\nstall_timeout_s = 2\nmin_rate_bytes_per_s = 1024\n",
    )
    .replace("retries = 3", "retries = 1");
    let d = TestDaemon::start_in(dir, &cfg);
    let slow = d.ok("c", "download_model", json!({"repo": "tester/trickle-st"}))["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let failed = wait_state(&d, &slow, "failed");
    let error = failed["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("bytes/s"), "{failed}");
    assert!(error.contains("models.min_rate_bytes_per_s"), "{failed}");
    // The one transfer slot is free again: a job at full rate completes.
    hub.set_rate(0);
    let fast = d.ok("c", "download_model", json!({"repo": "tester/tiny-st"}))["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_state(&d, &fast, "done");
}

//! A variant is one model's file set: two models of a repo with the same quantisation label
//! are two variants, a file name picks exactly its own set, and the label they share is
//! refused, listing them.

use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::hf::{HfServer, listed_files, pseudo_random, wait_download_done};
use toolvisor_tests::{TestDaemon, wait_for};

const REPO: &str = "tester/two-models";

/// A daemon downloading from `hub`.
fn start(hub: &HfServer) -> TestDaemon {
    TestDaemon::start(&format!(
        "[models]\nendpoint = {:?}\nconnect_timeout_s = 5\nretries = 2\n",
        hub.url()
    ))
}

fn gguf(seed: u64) -> Vec<u8> {
    let mut b = pseudo_random(seed, 50_000);
    b[..4].copy_from_slice(b"GGUF");
    b
}

#[test]
fn two_models_with_one_label_are_two_variants_and_the_label_alone_is_refused() {
    let hub = HfServer::start(None);
    hub.add_repo(
        REPO,
        vec![
            ("alpha-Q4_K_M.gguf", gguf(1), true),
            ("beta-Q4_K_M.gguf", gguf(2), true),
        ],
        false,
    );
    hub.stall_at(REPO, "alpha-Q4_K_M.gguf", 1_000);
    let d = start(&hub);
    let alpha = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "alpha-Q4_K_M.gguf"}),
    );
    wait_for("alpha's transfer to stall", Duration::from_secs(30), || {
        hub.stalled().then_some(())
    });
    // Beta while alpha downloads: its own job with its own file.
    let beta = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "beta-Q4_K_M.gguf"}),
    );
    assert!(beta.get("already_running").is_none(), "{beta}");
    assert_ne!(beta["job_id"], alpha["job_id"]);
    assert_eq!(beta["files"].as_array().unwrap().len(), 1, "{beta}");
    assert_eq!(beta["files"][0]["name"], "beta-Q4_K_M.gguf");
    assert_eq!(alpha["files"].as_array().unwrap().len(), 1, "{alpha}");
    // The label both share names neither.
    let e = match d.call(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "Q4_K_M"}),
    ) {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("Q4_K_M should be refused, got {}", v.0),
    };
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(
        e.message.contains("alpha-Q4_K_M.gguf") && e.message.contains("beta-Q4_K_M.gguf"),
        "{e}"
    );
    hub.release();
}

fn refused(d: &TestDaemon, args: serde_json::Value) -> toolvisor_protocol::error::ToolError {
    match d.call("c", "download_model", args.clone()) {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("{args} should be refused, got {}", v.0),
    }
}

/// huggingface-cli's `--include`/`--exclude` as one `glob` (grep's form: comma-separated, `!`
/// excludes): globs pick the files (whole: a split file is
/// all its shards or refused), the set they pick is a variant of its own named by its files,
/// and exactly those files reach the store.
#[test]
fn include_and_exclude_globs_download_exactly_the_files_they_pick() {
    const GLOBS: &str = "tester/globs";
    let hub = HfServer::start(None);
    hub.add_repo(
        GLOBS,
        vec![
            ("README.md", b"# model\n".to_vec(), false),
            ("config.json", b"{\"a\": 1}".to_vec(), false),
            ("tokenizer.json", b"{\"t\": 2}".to_vec(), false),
            ("model.safetensors.index.json", b"{}".to_vec(), false),
            (
                "model-00001-of-00002.safetensors",
                pseudo_random(3, 40_000),
                true,
            ),
            (
                "model-00002-of-00002.safetensors",
                pseudo_random(4, 40_000),
                true,
            ),
            ("model.onnx", pseudo_random(5, 30_000), true),
        ],
        false,
    );
    let d = start(&hub);
    let job = d.ok(
        "c",
        "download_model",
        json!({"repo": GLOBS, "glob": "*.json, *.onnx, !*.index.json"}),
    );
    assert_eq!(
        listed_files(&job),
        ["config.json", "model.onnx", "tokenizer.json"],
        "{job}"
    );
    let variant = job["variant"].as_str().unwrap().to_string();
    assert!(variant.starts_with("files-"), "{job}");
    wait_download_done(&d, job["job_id"].as_str().unwrap());
    let models = d.ok("c", "list_models", json!({}));
    let model = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["variant"] == variant.as_str())
        .unwrap_or_else(|| panic!("{variant} not listed: {models}"));
    assert_eq!(model["complete"], true, "{model}");
    // Exactly the picked files reached the store: nothing of the safetensors.
    let dir = std::path::Path::new(model["path"].as_str().unwrap());
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    on_disk.sort();
    assert_eq!(on_disk, ["config.json", "model.onnx", "tokenizer.json"]);
    assert_eq!(
        std::fs::read(dir.join("config.json")).unwrap(),
        b"{\"a\": 1}"
    );

    // Exclude from the variant's set: its own variant, without the excluded file.
    let lean = d.ok(
        "c",
        "download_model",
        json!({"repo": GLOBS, "variant": "safetensors", "glob": "!tokenizer.*"}),
    );
    assert!(
        lean["variant"]
            .as_str()
            .unwrap()
            .starts_with("safetensors-"),
        "{lean}"
    );
    assert!(!lean.to_string().contains("tokenizer.json"), "{lean}");

    // Half of a split file, nothing at all, a variant and globs together: refused, named.
    let e = refused(&d, json!({"repo": GLOBS, "glob": "*-00001-of-*"}));
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.message.contains("shards [1] of 2"), "{e}");
    let e = refused(&d, json!({"repo": GLOBS, "glob": "*.gguf"}));
    assert!(
        e.message.contains("select no file") && e.message.contains("model.onnx"),
        "{e}"
    );
    let e = refused(
        &d,
        json!({"repo": GLOBS, "variant": "safetensors", "glob": "*.json"}),
    );
    assert!(e.message.contains("not both"), "{e}");
    let e = refused(&d, json!({"repo": GLOBS, "glob": "[oops"}));
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.message.contains("not a glob"), "{e}");
}

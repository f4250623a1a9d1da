//! `load_model` on what `download_model` put in the store, with a real llama.cpp server
//! (llama-cpp-python from `.test-deps/inference-venv`) on the tiny GGUF: a variant that comes
//! with a multimodal projector (`mmproj-F32.gguf`, which sorts before the model's file) loads
//! the model's file, never the projector; two revisions of one repo with the same variant are
//! told apart, and the name the ambiguity error suggests loads the one it names.

use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::hf::{HfServer, pseudo_random};
use toolvisor_tests::inference::{chat, config, make_gguf, wait_state};
use toolvisor_tests::{TestDaemon, wait_for};

const REPO: &str = "walk/tiny-GGUF";
const READY: Duration = Duration::from_secs(120);

fn done(d: &TestDaemon, started: &Json) -> Json {
    let id = started["job_id"].as_str().unwrap().to_string();
    wait_for(
        &format!("download job {id} to end"),
        Duration::from_secs(90),
        || {
            let j = d.ok("c", "list_downloads", json!({"job_id": id}))["jobs"][0].clone();
            match j["state"].as_str() {
                Some("done") => Some(j),
                Some("failed" | "cancelled") => panic!("{j}"),
                _ => None,
            }
        },
    )
}

fn tiny(dir: &std::path::Path, seed: u32) -> Vec<u8> {
    let path = dir.join(format!("tiny{seed}.gguf"));
    make_gguf(&path, seed);
    std::fs::read(&path).unwrap()
}

fn daemon(hub: &HfServer) -> TestDaemon {
    TestDaemon::start(&format!(
        "[models]\nendpoint = {:?}\n{}",
        hub.url(),
        config("", "")
    ))
}

#[test]
fn a_variant_with_a_projector_loads_its_model_file_never_the_projector() {
    let dir = tempfile::tempdir().unwrap();
    let mut projector = pseudo_random(11, 4096);
    projector[..4].copy_from_slice(b"GGUF");
    let hub = HfServer::start(None);
    hub.add_repo(
        "walk/vision-GGUF",
        vec![
            ("README.md", b"# tiny\n".to_vec(), false),
            ("mmproj-F32.gguf", projector, true),
            ("tiny-F32.gguf", tiny(dir.path(), 1), true),
        ],
        false,
    );
    let d = daemon(&hub);
    let started = d.ok("c", "download_model", json!({"repo": "walk/vision-GGUF"}));
    let mut files: Vec<&str> = started["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    files.sort();
    assert_eq!(files, ["mmproj-F32.gguf", "tiny-F32.gguf"], "{started}");
    done(&d, &started);
    // "mmproj-F32.gguf" sorts before "tiny-F32.gguf": the projector must not be the model.
    d.ok(
        "c",
        "load_model",
        json!({"model": "walk/vision-GGUF", "alias": "vision", "context": 256}),
    );
    let ready = wait_state(&d, "vision", "ready", READY);
    assert!(
        ready["path"].as_str().unwrap().ends_with("/tiny-F32.gguf"),
        "{ready}"
    );
    assert!(
        ready["projector"]
            .as_str()
            .unwrap()
            .ends_with("/mmproj-F32.gguf"),
        "{ready}"
    );
    // llama-cpp-python is configured here: it is not given the projector, and says so.
    assert_eq!(ready["projector_passed"], false, "{ready}");
    assert_eq!(chat(&d, "vision", 4).status, 200);
}

/// The snapshot directory the ref of `revision` names.
fn snapshot(d: &TestDaemon, revision: &str) -> std::path::PathBuf {
    let repo_dir = d.state_dir().join("models").join(REPO.replace('/', "--"));
    let key = std::fs::read_to_string(repo_dir.join("refs").join(revision)).unwrap();
    repo_dir.join("snapshots").join(key)
}

#[test]
fn two_revisions_of_one_variant_load_by_the_name_the_error_suggests() {
    let dir = tempfile::tempdir().unwrap();
    let hub = HfServer::start(None);
    hub.add_repo(
        REPO,
        vec![("tiny-F32.gguf", tiny(dir.path(), 1), true)],
        false,
    );
    hub.add_revision(
        REPO,
        "v2",
        vec![("tiny-F32.gguf", tiny(dir.path(), 2), true)],
    );
    let d = daemon(&hub);
    let main = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "F32"}),
    );
    done(&d, &main);
    let v2 = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "revision": "v2", "variant": "F32"}),
    );
    done(&d, &v2);

    // The repo alone, or with its variant, names both revisions: refused, naming each.
    let e = match d.call("c", "load_model", json!({"model": format!("{REPO}:F32")})) {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("an ambiguous name loaded: {}", v.0),
    };
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(
        e.message.contains("walk/tiny-GGUF@main") && e.message.contains("walk/tiny-GGUF@v2"),
        "{e}"
    );
    let suggested = e
        .hint
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no name in the hint: {e}"))
        .to_string();
    assert_eq!(suggested, "walk/tiny-GGUF@main", "{e}");

    // The suggestion loads the one it names.
    let loaded = d.ok(
        "c",
        "load_model",
        json!({"model": suggested, "alias": "tiny-main", "context": 256}),
    );
    assert_eq!(loaded["revision"], "main", "{loaded}");
    let ready = wait_state(&d, "tiny-main", "ready", READY);
    assert_eq!(
        ready["path"].as_str().unwrap(),
        snapshot(&d, "main").join("tiny-F32.gguf").to_str().unwrap(),
        "{ready}"
    );
    assert_eq!(chat(&d, "tiny-main", 4).status, 200);

    // The other revision, by the name list_models gives it.
    let models = d.ok("c", "list_models", json!({}));
    let names: Vec<(&str, &str)> = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap(),
                m["load_state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("walk/tiny-GGUF@main", "ready"),
            ("walk/tiny-GGUF@v2", "not_loaded")
        ],
        "{models}"
    );
    d.ok(
        "c",
        "load_model",
        json!({"model": "walk/tiny-GGUF@v2:F32", "alias": "tiny-v2", "context": 256}),
    );
    let ready = wait_state(&d, "tiny-v2", "ready", READY);
    assert_eq!(
        ready["path"].as_str().unwrap(),
        snapshot(&d, "v2").join("tiny-F32.gguf").to_str().unwrap(),
        "{ready}"
    );
    assert_ne!(snapshot(&d, "v2"), snapshot(&d, "main"));
    assert_eq!(chat(&d, "tiny-v2", 4).status, 200);
}

#[test]
fn a_pull_request_revision_downloads_and_loads_by_its_ref() {
    // The Hub names a pull request's files `refs/pr/N`: one store directory, one name.
    let dir = tempfile::tempdir().unwrap();
    let hub = HfServer::start(None);
    hub.add_repo(
        REPO,
        vec![("tiny-F32.gguf", tiny(dir.path(), 1), true)],
        false,
    );
    hub.add_revision(
        REPO,
        "refs/pr/1",
        vec![("tiny-F32.gguf", tiny(dir.path(), 3), true)],
    );
    let d = daemon(&hub);
    let pr = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "revision": "refs/pr/1", "variant": "F32"}),
    );
    done(&d, &pr);
    let models = d.ok("c", "list_models", json!({}));
    let m = &models["models"][0];
    assert_eq!(m["revision"], "refs/pr/1", "{models}");
    // Its snapshot is its commit's; its ref is one file, `refs%2Fpr%2F1`.
    let path = std::path::Path::new(m["path"].as_str().unwrap());
    let repo_dir = path.parent().unwrap().parent().unwrap();
    assert_eq!(
        std::fs::read_to_string(repo_dir.join("refs/refs%2Fpr%2F1")).unwrap(),
        path.file_name().unwrap().to_string_lossy(),
        "{models}"
    );
    assert_eq!(m["commit"].as_str(), path.file_name().unwrap().to_str());
    let name = format!("{REPO}@refs/pr/1:F32");
    d.ok("c", "load_model", json!({"model": name, "alias": "pr"}));
    wait_state(&d, "pr", "ready", READY);
    assert_eq!(chat(&d, "pr", 4).status, 200);
    // A ref that is not a pull request's is refused, saying what is taken.
    let e = match d.call(
        "c",
        "download_model",
        json!({"repo": REPO, "revision": "refs/heads/main"}),
    ) {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("refs/heads/main was taken: {}", v.0),
    };
    assert!(e.message.contains("refs/pr/N"), "{e}");
}

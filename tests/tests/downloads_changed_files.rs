//! A file in the store is complete only when its bytes are the ones listed: a file changed on
//! the hub with the same size (another sha256, or, for a file listed without one, another
//! commit) or changed on disk is fetched again, never `already_complete`, and the manifest
//! records only hashes the bytes on disk have. A new commit is a new snapshot (files it keeps
//! linked from the old one); the old snapshot stays, named by its commit.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_tests::hf::{HfServer, pseudo_random, sha256_hex};
use toolvisor_tests::{TestDaemon, wait_for};

const REPO: &str = "tester/changing";
const SIZE: usize = 200_000;

fn start(hub: &HfServer) -> TestDaemon {
    TestDaemon::start(&format!(
        "[models]\nendpoint = {:?}\nconnect_timeout_s = 5\nretries = 2\n",
        hub.url()
    ))
}

fn model_dir(d: &TestDaemon) -> PathBuf {
    toolvisor_tests::inference::main_snapshot(&d.state_dir().join("models"), REPO)
}

/// `download_model` of `variant`, waited for until done; its first answer.
fn download(d: &TestDaemon, variant: Option<&str>) -> Json {
    let mut args = json!({"repo": REPO});
    if let Some(v) = variant {
        args["variant"] = json!(v);
    }
    let started = d.ok("c", "download_model", args);
    if started["already_complete"] == true {
        return started;
    }
    let id = started["job_id"].as_str().unwrap().to_string();
    wait_for(
        &format!("download job {id} to be done"),
        Duration::from_secs(60),
        || {
            let j = d.ok("c", "list_downloads", json!({"job_id": id}))["jobs"][0].clone();
            assert_ne!(j["state"], "failed", "{j}\n{}", d.log_text());
            (j["state"] == "done").then_some(())
        },
    );
    started
}

fn manifest(d: &TestDaemon, variant: &str) -> Json {
    let path = model_dir(d).join(format!(".toolvisor-model-{variant}.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn gguf(seed: u64) -> Vec<u8> {
    let mut b = pseudo_random(seed, SIZE);
    b[..4].copy_from_slice(b"GGUF");
    b
}

#[test]
fn a_file_changed_on_the_hub_or_on_disk_with_the_same_size_is_fetched_again() {
    let hub = HfServer::start(None);
    let name = "tiny-Q8_0.gguf";
    let old = gguf(1);
    hub.add_repo(REPO, vec![(name, old.clone(), true)], false);
    let d = start(&hub);
    assert!(download(&d, Some("Q8_0")).get("already_complete").is_none());
    assert_eq!(download(&d, Some("Q8_0"))["already_complete"], true);
    assert_eq!(hub.served(REPO, name), SIZE as u64);

    // Regenerated on the hub: same size, other bytes, another sha256.
    let new = gguf(2);
    hub.add_repo(REPO, vec![(name, new.clone(), true)], false);
    let again = download(&d, Some("Q8_0"));
    assert!(again.get("already_complete").is_none(), "{again}");
    assert_eq!(hub.served(REPO, name), 2 * SIZE as u64);
    let path = model_dir(&d).join(name);
    assert_eq!(std::fs::read(&path).unwrap(), new);
    let m = manifest(&d, "Q8_0");
    assert_eq!(m["files"][0]["sha256"], sha256_hex(&new));
    assert_eq!(m["verified"][0]["sha256"], sha256_hex(&new), "{m}");
    // Verified once: the next call takes the record, nothing is fetched.
    assert_eq!(download(&d, Some("Q8_0"))["already_complete"], true);
    assert_eq!(hub.served(REPO, name), 2 * SIZE as u64);

    // Changed on disk with the same size: its bytes are not the listed ones.
    std::fs::write(&path, gguf(3)).unwrap();
    let repaired = download(&d, Some("Q8_0"));
    assert!(repaired.get("already_complete").is_none(), "{repaired}");
    assert_eq!(hub.served(REPO, name), 3 * SIZE as u64);
    assert_eq!(std::fs::read(&path).unwrap(), new);
    // main moved to a new commit: a new snapshot that main's ref names. The old snapshot
    // keeps the old bytes, named by its commit, until delete_model removes it.
    let models = d.ok("c", "list_models", json!({}));
    let list = models["models"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{models}");
    assert!(list.iter().all(|m| m["complete"] == true), "{models}");
    let now = list.iter().find(|m| m["current"] == true).unwrap();
    let before = list.iter().find(|m| m["current"] == false).unwrap();
    assert_eq!(now["name"], REPO, "{models}");
    assert_eq!(now["path"].as_str(), model_dir(&d).to_str());
    let commit = before["commit"].as_str().unwrap();
    assert_ne!(Some(commit), now["commit"].as_str(), "{models}");
    let old_name = format!("{REPO}@{}", &commit[..12]);
    assert_eq!(before["name"], old_name.as_str(), "{models}");
    let old_path = PathBuf::from(before["path"].as_str().unwrap()).join(name);
    assert_eq!(std::fs::read(&old_path).unwrap(), old);
    let deleted = d.ok("c", "delete_model", json!({"model": old_name}));
    assert_eq!(deleted["bytes_freed"], SIZE as u64, "{deleted}");
    assert!(!old_path.exists());
    let models = d.ok("c", "list_models", json!({}));
    assert_eq!(models["models"].as_array().unwrap().len(), 1, "{models}");
    assert_eq!(models["models"][0]["name"], REPO, "{models}");
    assert_eq!(std::fs::read(&path).unwrap(), new);
}

#[test]
fn a_file_listed_without_a_hash_is_fetched_again_when_the_commit_changes() {
    let hub = HfServer::start(None);
    let (model, config) = ("model.safetensors", "config.json");
    let files = |cfg: &[u8]| {
        vec![
            (model, pseudo_random(7, SIZE), true),
            (config, cfg.to_vec(), false),
        ]
    };
    hub.add_repo(REPO, files(br#"{"a":1}"#), false);
    let d = start(&hub);
    let first = download(&d, None);
    let names: Vec<&str> = first["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&config), "{first}");
    assert_eq!(download(&d, None)["already_complete"], true);
    // Same size, other content, so a new commit: config.json is fetched again, the file
    // whose sha256 is listed and unchanged is not.
    hub.add_repo(REPO, files(br#"{"a":2}"#), false);
    let again = download(&d, None);
    assert!(again.get("already_complete").is_none(), "{again}");
    assert_eq!(
        std::fs::read(model_dir(&d).join(config)).unwrap(),
        br#"{"a":2}"#
    );
    assert_eq!(hub.served(REPO, model), SIZE as u64);
    assert_eq!(download(&d, None)["already_complete"], true);
    // The unchanged file is the older snapshot's, linked: one inode, no second copy.
    let models = d.ok("c", "list_models", json!({}));
    let dirs: Vec<PathBuf> = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| PathBuf::from(m["path"].as_str().unwrap()))
        .collect();
    assert_eq!(dirs.len(), 2, "{models}");
    let inode = |d: &PathBuf| {
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(d.join(model)).unwrap())
    };
    assert_eq!(inode(&dirs[0]), inode(&dirs[1]));
    // Deleting the older snapshot frees its own config.json, not the file the newer one links.
    let models = d.ok("c", "list_models", json!({}));
    let old = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["current"] == false)
        .unwrap()
        .clone();
    let deleted = d.ok("c", "delete_model", json!({"model": old["name"]}));
    assert_eq!(deleted["bytes_freed"], br#"{"a":1}"#.len(), "{deleted}");
    let now = PathBuf::from(
        d.ok("c", "list_models", json!({}))["models"][0]["path"]
            .as_str()
            .unwrap(),
    );
    assert_eq!(std::fs::read(now.join(model)).unwrap().len(), SIZE);
}

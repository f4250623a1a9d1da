//! The loopback Hugging Face-compatible hub of the download tests (crate `toolvisor-testhub`,
//! shared with the benches and the chaos runner).

pub use toolvisor_testhub::*;

/// The download job `id` as `list_downloads` shows it.
pub fn download_job(d: &crate::TestDaemon, id: &str) -> serde_json::Value {
    d.ok("c", "list_downloads", serde_json::json!({"job_id": id}))["jobs"][0].clone()
}

/// Wait (up to two minutes) until download job `id` is done; its entry. A job that fails
/// panics with the daemon's log.
pub fn wait_download_done(d: &crate::TestDaemon, id: &str) -> serde_json::Value {
    crate::wait_for(
        &format!("download job {id} to be done"),
        std::time::Duration::from_secs(120),
        || {
            let j = download_job(d, id);
            assert_ne!(
                j["state"],
                "failed",
                "job {id} failed: {j}\n{}",
                d.log_text()
            );
            (j["state"] == "done").then_some(j)
        },
    )
}

/// The names of the files a `download_model` answer lists, sorted.
pub fn listed_files(started: &serde_json::Value) -> Vec<String> {
    let mut names: Vec<String> = started["files"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

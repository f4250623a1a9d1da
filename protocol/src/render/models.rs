//! The renderings of the model tools' results (`results/models.rs`): the downloads
//! (`download_model`, `list_downloads`, `cancel_download`, `list_models`, `delete_model`,
//! `search_huggingface_models`) and the inference pool (`load_model`, `unload_model`,
//! `get_inference_status`, `get_token_usage_stats`).

use super::{Doc, Outward, Render};
use crate::results::{
    CancelDownloadResult, DeleteModelResult, DownloadAlreadyComplete, DownloadJob,
    DownloadModelJob, DownloadModelResult, InferenceStatusResult, ListDownloadsResult,
    ListModelsResult, LoadModelResult, LoadedModel, SearchModelsResult, TokenUsageResult,
    UnloadModelResult,
};

/// A string field when there is one (a fact, or a block when long).
fn text(doc: &mut Doc, key: &str, value: &Option<String>) {
    if let Some(value) = value {
        doc.string(key, value);
    }
}

/// A download job's facts, its files one a line (`percent`, a float, as its JSON writes it).
fn job(doc: &mut Doc, job: &DownloadJob) {
    doc.string("job_id", &job.job_id);
    doc.string("repo", &job.repo);
    doc.string("revision", &job.revision);
    doc.string("variant", &job.variant);
    doc.field("state", &job.state);
    text(doc, "error", &job.error);
    doc.fact("bytes_done", job.bytes_done);
    doc.fact("bytes_total", job.bytes_total);
    doc.field("percent", &job.percent);
    doc.opt("rate_bytes_per_s", job.rate_bytes_per_s);
    doc.opt("eta_s", job.eta_s);
    doc.string("path", &job.path);
    doc.field("files", &job.files);
}

/// The job started (or already running) and how to follow it, or the model already in the
/// store.
impl Render for DownloadModelResult {
    fn write(&self, doc: &mut Doc<'_>, outward: &Outward) {
        match self {
            DownloadModelResult::Job(j) => j.write(doc, outward),
            DownloadModelResult::AlreadyComplete(c) => c.write(doc, outward),
        }
    }
}

/// The job's progress, its files one a line.
impl Render for DownloadModelJob {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        job(doc, &self.job);
        doc.opt("already_running", self.already_running);
        text(doc, "hint", &self.hint);
    }
}

/// Where the model is, its files one a line.
impl Render for DownloadAlreadyComplete {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("state", &self.state);
        doc.fact("already_complete", self.already_complete);
        doc.string("repo", &self.repo);
        doc.string("revision", &self.revision);
        text(doc, "commit", &self.commit);
        doc.string("variant", &self.variant);
        doc.string("path", &self.path);
        doc.fact("bytes_total", self.bytes_total);
        doc.field("files", &self.files);
    }
}

/// One job a line.
impl Render for ListDownloadsResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("jobs", &self.jobs);
    }
}

/// Whether the job stopped, what is kept and how to resume, or why it was not.
impl Render for CancelDownloadResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("job_id", &self.job_id);
        doc.field("state", &self.state);
        doc.fact("cancelled", self.cancelled);
        text(doc, "message", &self.message);
        doc.opt("bytes_done", self.bytes_done);
        doc.opt("bytes_total", self.bytes_total);
        text(doc, "hint", &self.hint);
    }
}

/// The store and the orphans' bytes; the memory, the accelerators, one model a line, the
/// orphans.
impl Render for ListModelsResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("store", &self.store);
        doc.field("memory", &self.memory);
        doc.field("accelerators", &self.accelerators);
        doc.field("models", &self.models);
        doc.field("orphans", &self.orphans);
        doc.fact("orphan_bytes", self.orphan_bytes);
    }
}

/// What was removed and freed, the files kept.
impl Render for DeleteModelResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("model", &self.model);
        doc.string("path", &self.path);
        doc.fact("files_removed", self.files_removed);
        doc.fact("bytes_freed", self.bytes_freed);
        doc.field("kept", &self.kept);
    }
}

/// The query; the accelerators, one candidate a line.
impl Render for SearchModelsResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("query", &self.query);
        doc.field("accelerators", &self.accelerators);
        doc.field("models", &self.models);
    }
}

/// A pool model's facts and its placement (its server's pid is no model's business).
fn loaded(doc: &mut Doc, m: &LoadedModel) {
    doc.string("alias", &m.alias);
    doc.string("model", &m.model);
    doc.string("repo", &m.repo);
    doc.string("revision", &m.revision);
    doc.string("variant", &m.variant);
    doc.string("path", &m.path);
    doc.string("format", &m.format);
    doc.fact("context", m.context);
    doc.fact("size_bytes", m.size_bytes);
    doc.field("state", &m.state);
    doc.fact("restarts", m.restarts);
    doc.fact("idle_s", m.idle_s);
    doc.fact("requests_in_flight", m.requests_in_flight);
    doc.fact("pinned", m.pinned);
    doc.fact("queue_depth", m.queue_depth);
    doc.fact("slots_free", m.slots_free);
    doc.field("placement", &m.placement);
    text(doc, "projector", &m.projector);
    doc.opt("projector_passed", m.projector_passed);
    doc.opt("port", m.port);
    text(doc, "url", &m.url);
    doc.opt("rss_bytes", m.rss_bytes);
    doc.opt("load_ms", m.load_ms);
    doc.opt("loading_ms", m.loading_ms);
    doc.opt("ready_timeout_s", m.ready_timeout_s);
    text(doc, "last_error", &m.last_error);
    text(doc, "reason", &m.reason);
    doc.field("stderr_tail", &m.stderr_tail);
}

/// The model's status entry, with its fit, what was evicted for it, and how to follow it.
impl Render for LoadModelResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        loaded(doc, &self.model);
        doc.field("fit", &self.fit);
        doc.field("evicted", &self.evicted);
        text(doc, "hint", &self.hint);
        text(doc, "note", &self.note);
    }
}

/// What was unloaded, from what state, and the port freed.
impl Render for UnloadModelResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("alias", &self.alias);
        doc.string("model", &self.model);
        doc.fact("unloaded", self.unloaded);
        doc.field("was", &self.was);
        doc.opt("port_freed", self.port_freed);
    }
}

/// The pool's settings; one model a line (without pids), the memory, the accelerators, the
/// aliases gone, the endpoint.
impl Render for InferenceStatusResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("models", &self.models);
        doc.field("memory", &self.memory);
        doc.field("accelerators", &self.accelerators);
        doc.field("gone", &self.gone);
        doc.field("endpoint", &self.endpoint);
        doc.fact("idle_ttl_s", self.idle_ttl_s);
        doc.fact("on_demand", self.on_demand);
        doc.fact("max_loaded", self.max_loaded);
    }
}

/// The book's file; the totals, then one day, model, day and model a line.
impl Render for TokenUsageResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("totals", &self.totals);
        doc.field("per_day", &self.per_day);
        doc.field("per_model", &self.per_model);
        doc.field("per_day_model", &self.per_day_model);
        doc.string("file", &self.file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::as_before;
    use serde_json::{Value as Json, json};

    fn placement() -> Json {
        json!({"label":"fits_gpu","need_bytes":1200000000u64,"accelerator":"NVIDIA RTX 4090","kv_cache_bytes":134217728})
    }

    fn accelerators() -> Json {
        json!([{"kind":"nvidia","name":"NVIDIA RTX 4090","memory_total_bytes":25757220864u64,
            "memory_free_bytes":24000000000u64,"memory_used_bytes":1757220864u64}])
    }

    #[test]
    fn downloads_read_as_before() {
        // As docs/TOOLS.md shows them, filled in.
        let job = json!({"job_id":"dl1","repo":"TheOrg/tiny-GGUF","revision":"main","variant":"Q4_K_M",
            "state":"downloading","error":null,"bytes_done":3825000,"bytes_total":9000000,"percent":42.5,
            "rate_bytes_per_s":52428800,"eta_s":1,
            "path":"/home/me/.local/state/toolvisor/models/TheOrg--tiny-GGUF/snapshots/main",
            "files":[{"name":"tiny-Q4_K_M-00001-of-00003.gguf","size":3000000,"bytes_done":3000000,
                    "sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","state":"done","error":null},
                {"name":"tiny-Q4_K_M-00002-of-00003.gguf","size":3000000,"bytes_done":825000,"sha256":null,
                    "state":"downloading","error":"connection reset; retrying (2 of 5)"},
                {"name":"tiny-Q4_K_M-00003-of-00003.gguf","size":3000000,"bytes_done":0,"sha256":null,"state":"queued","error":null}]});
        let mut started = job.clone();
        started["state"] = json!("queued");
        started["percent"] = json!(0.0);
        started["rate_bytes_per_s"] = Json::Null;
        started["eta_s"] = Json::Null;
        started["hint"] =
            json!("started in the background; poll list_downloads {\"job_id\": \"dl1\"}");
        let text = as_before::<DownloadModelResult>("download_model", started);
        assert!(text.contains("hint: started in the background"), "{text}");
        let mut running = job.clone();
        running["already_running"] = json!(true);
        running["error"] = json!("the hub answered 503\nretrying in 4 s");
        as_before::<DownloadModelResult>("download_model", running);
        as_before::<DownloadModelResult>(
            "download_model",
            json!({"state":"done","already_complete":true,"repo":"TheOrg/tiny-model","revision":"main",
                "commit":"1f0c2a9e77b3d5c0a8e4f6b21d9c3e7a5b8f0d42","variant":"safetensors",
                "path":"/home/me/.local/state/toolvisor/models/TheOrg--tiny-model/snapshots/1f0c2a9e77b3d5c0a8e4f6b21d9c3e7a5b8f0d42",
                "bytes_total":1200,"files":[{"name":"config.json","size":200,"sha256":null},
                    {"name":"model.safetensors","size":1000,"sha256":"2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"}]}),
        );
        as_before::<DownloadModelResult>(
            "download_model",
            json!({"state":"done","already_complete":true,"repo":"TheOrg/tiny-model","revision":"v2",
                "commit":null,"variant":"safetensors","path":"/models/TheOrg--tiny-model/snapshots/v2",
                "bytes_total":0,"files":[]}),
        );
        as_before::<ListDownloadsResult>("list_downloads", json!({"jobs":[job]}));
        as_before::<ListDownloadsResult>("list_downloads", json!({"jobs":[]}));
        as_before::<CancelDownloadResult>(
            "cancel_download",
            json!({"job_id":"dl1","state":"cancelled","cancelled":true,"bytes_done":3825000,"bytes_total":9000000,
                "hint":"download_model with the same repo, revision and variant resumes it"}),
        );
        as_before::<CancelDownloadResult>(
            "cancel_download",
            json!({"job_id":"dl2","state":"done","cancelled":false,"message":"dl2 had already ended: done"}),
        );
    }

    #[test]
    fn the_store_reads_as_before() {
        as_before::<ListModelsResult>(
            "list_models",
            json!({"store":"/home/me/.local/state/toolvisor/models",
                "memory":{"total_bytes":67108864000u64,"available_bytes":41943040000u64},
                "accelerators": accelerators(),
                "models":[{"name":"TheOrg/tiny-GGUF","repo":"TheOrg/tiny-GGUF","revision":"main",
                    "commit":"1f0c2a9e77b3d5c0a8e4f6b21d9c3e7a5b8f0d42","current":true,"variant":"Q4_K_M",
                    "path":"/home/me/.local/state/toolvisor/models/TheOrg--tiny-GGUF/snapshots/1f0c2a9e77b3d5c0a8e4f6b21d9c3e7a5b8f0d42",
                    "size_bytes":9000000,"complete":true,"fit":"fits","placement":placement(),"load_state":"ready","alias":"tiny",
                    "files":[{"name":"tiny-Q4_K_M.gguf","size":9000000,"bytes_present":9000000,"complete":true}]},
                    {"name":"TheOrg/big@v1:Q8_0","repo":"TheOrg/big","revision":"v1","commit":null,"current":false,
                    "variant":"Q8_0","path":"/m/TheOrg--big/snapshots/v1","size_bytes":70000000000u64,"complete":false,
                    "fit":"too_large","placement":{"label":"too_large","need_bytes":84000000000u64,"accelerator":null},
                    "load_state":"not_loaded","files":[]}],
                "orphans":[{"path":"TheOrg--old/blobs/ab12.incomplete","bytes":4096}],"orphan_bytes":4096}),
        );
        as_before::<ListModelsResult>(
            "list_models",
            json!({"store":"/m","memory":null,"accelerators":[],"models":[],"orphans":[],"orphan_bytes":0}),
        );
        as_before::<DeleteModelResult>(
            "delete_model",
            json!({"model":"TheOrg/tiny-GGUF@main:Q4_K_M",
                "path":"/home/me/.local/state/toolvisor/models/TheOrg--tiny-GGUF/snapshots/1f0c2a9e77b3d5c0a8e4f6b21d9c3e7a5b8f0d42",
                "files_removed":1,"bytes_freed":9000000,"kept":[]}),
        );
        as_before::<DeleteModelResult>(
            "delete_model",
            json!({"model":"TheOrg/tiny-model@main:fp16","path":"/m/TheOrg--tiny-model/snapshots/main",
                "files_removed":2,"bytes_freed":2400,"kept":["config.json","tokenizer.json"]}),
        );
        as_before::<SearchModelsResult>(
            "search_huggingface_models",
            json!({"query":"qwen3 gguf","accelerators": accelerators(),
                "models":[{"repo":"Qwen/Qwen3-8B-GGUF","downloads":182340,"gated":false,"fit":"fits","placement":"fits_gpu",
                    "variants":[{"variant":"Q4_K_M","bytes":5030000000u64,"projector":null,"fit":"fits",
                        "placement":placement(),"downloaded":false},
                        {"variant":"Q8_0","bytes":null,"projector":"mmproj-F16.gguf","fit":"unknown","placement":null,"downloaded":true}]},
                    {"repo":"meta-llama/Llama-3-8B","downloads":null,"gated":"manual","fit":"tight","placement":"tight","variants":[]}]}),
        );
        as_before::<SearchModelsResult>(
            "search_huggingface_models",
            json!({"query":"nothing like it","accelerators":[],"models":[]}),
        );
    }

    fn loaded() -> Json {
        json!({"alias":"tiny","model":"TheOrg/tiny-GGUF","repo":"TheOrg/tiny-GGUF","revision":"main","variant":"Q4_K_M",
            "path":"/m/TheOrg--tiny-GGUF/snapshots/main/tiny-Q4_K_M.gguf","format":"gguf","context":4096,
            "size_bytes":9000000,"state":"ready","restarts":0,"idle_s":12,"requests_in_flight":0,"pinned":false,
            "queue_depth":0,"slots_free":4,"placement":placement(),"port":40313,"url":"http://127.0.0.1:40313",
            "pid":81234,"rss_bytes":104857600,"load_ms":1830})
    }

    #[test]
    fn the_pool_reads_as_before() {
        let mut loading = loaded();
        loading["state"] = json!("loading");
        loading["loading_ms"] = json!(250);
        loading["ready_timeout_s"] = json!(120);
        loading["fit"] = json!("fits");
        loading["evicted"] =
            json!({"alias":"big","model":"TheOrg/big:Q8_0","idle_s":900,"why":"idle the longest"});
        loading["hint"] = json!("poll get_inference_status until its state is ready");
        loading["projector"] = json!("mmproj-F16.gguf");
        loading["projector_passed"] = json!(true);
        let text = as_before::<LoadModelResult>("load_model", loading);
        assert!(!text.contains("81234"), "{text}");
        let mut already = loaded();
        already["note"] = json!("already loaded as tiny; nothing started");
        as_before::<LoadModelResult>("load_model", already);
        let mut failed = loaded();
        for k in ["port", "url", "pid", "rss_bytes"] {
            failed.as_object_mut().unwrap().remove(k);
        }
        failed["state"] = json!("failed");
        failed["restarts"] = json!(3);
        failed["last_error"] = json!("exited with status 1");
        failed["stderr_tail"] = json!([
            "llama_model_load: error loading model",
            "main: exiting due to model loading error"
        ]);
        as_before::<LoadModelResult>("load_model", failed.clone());
        as_before::<UnloadModelResult>(
            "unload_model",
            json!({"alias":"tiny","model":"TheOrg/tiny-GGUF","unloaded":true,"was":"ready","port_freed":40313}),
        );
        as_before::<UnloadModelResult>(
            "unload_model",
            json!({"alias":"tiny","model":"TheOrg/tiny-GGUF","unloaded":true,"was":"failed","port_freed":null}),
        );
        let mut unloaded = failed;
        unloaded["state"] = json!("unloaded");
        unloaded["reason"] = json!("idle for 600 s");
        as_before::<InferenceStatusResult>(
            "get_inference_status",
            json!({"models":[loaded(), unloaded],
                "memory":{"total_bytes":67108864000u64,"available_bytes":41943040000u64},
                "accelerators": accelerators(),
                "gone":[{"alias":"big","model":"TheOrg/big:Q8_0","why":"evicted to make room for tiny","gone_s":30,
                    "reloads_on_request":true}],
                "endpoint":{"socket":"/run/user/1000/toolvisor.sock.inference","listen":"127.0.0.1:8089","listen_needs_key":true},
                "idle_ttl_s":600,"on_demand":true,"max_loaded":2}),
        );
        as_before::<InferenceStatusResult>(
            "get_inference_status",
            json!({"models":[],"memory":null,"accelerators":[],"gone":[],"endpoint":null,
                "idle_ttl_s":0,"on_demand":false,"max_loaded":1}),
        );
    }

    #[test]
    fn token_usage_reads_as_before() {
        let counts = json!({"requests":3,"requests_without_usage":0,"prompt_tokens":42,"completion_tokens":96,
            "total_tokens":138,"cached_prompt_tokens":0});
        let mut day = counts.clone();
        day["date"] = json!("2026-12-06");
        let mut model = counts.clone();
        model["model"] = json!("TheOrg/tiny-GGUF");
        let mut day_model = day.clone();
        day_model["model"] = json!("TheOrg/tiny-GGUF");
        as_before::<TokenUsageResult>(
            "get_token_usage_stats",
            json!({"totals": counts, "per_day":[day], "per_model":[model], "per_day_model":[day_model],
                "file":"/home/me/.local/state/toolvisor/inference-usage.jsonl"}),
        );
        as_before::<TokenUsageResult>(
            "get_token_usage_stats",
            json!({"totals":{"requests":0,"requests_without_usage":0,"prompt_tokens":0,"completion_tokens":0,
                "total_tokens":0,"cached_prompt_tokens":0},"per_day":[],"per_model":[],"per_day_model":[],
                "file":"/s/inference-usage.jsonl"}),
        );
    }
}

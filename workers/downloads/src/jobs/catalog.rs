//! What the store holds and what the hub offers, as the tools answer them: `list_models` (each
//! model's size, files, completeness and fit on this machine's memory and accelerators) and
//! `search_huggingface_models`.

use serde_json::{Value as Json, json};

use super::Downloads;
use crate::error::DownloadError;
use crate::store::Manifest;
use crate::{choose, fit};

impl Downloads {
    fn memory(&self) -> Option<fit::Memory> {
        fit::read_memory(&self.config.meminfo)
    }

    /// `list_models`: the store's models with size, files, completeness and fit label.
    pub async fn models(&self) -> Json {
        let memory = self.memory();
        let accelerators = self.config.accelerators.detect().await;
        let manifests = self.store.manifests();
        let all: Vec<&Manifest> = manifests.iter().map(|(_, m)| m).collect();
        let models: Vec<Json> = manifests
            .iter()
            .map(|(dir, m)| {
                let files: Vec<Json> = m
                    .files
                    .iter()
                    .map(|f| {
                        let (have, complete) = self.store.present(dir, f, m.verified(&f.name));
                        json!({"name": f.name, "size": f.size, "bytes_present": have, "complete": complete})
                    })
                    .collect();
                let size: u64 = m.files.iter().map(|f| f.size).sum();
                let complete = m
                    .files
                    .iter()
                    .all(|f| self.store.present(dir, f, m.verified(&f.name)).1);
                let placement = fit::placement(size, memory, &accelerators);
                json!({
                    "name": crate::store::short_name(m, &all),
                    "repo": m.repo,
                    "revision": m.revision,
                    "variant": m.variant,
                    "path": dir.display().to_string(),
                    "size_bytes": size,
                    "complete": complete,
                    "fit": placement.fit(),
                    "placement": placement.to_json(&accelerators),
                    "load_state": "not_loaded",
                    "files": files,
                })
            })
            .collect();
        let store = self.store.clone();
        let orphans = tokio::task::spawn_blocking(move || store.orphans())
            .await
            .unwrap_or_default();
        let orphan_bytes: u64 = orphans.iter().map(|(_, b)| b).sum();
        json!({
            "store": self.store.root().display().to_string(),
            "memory": memory.map(|m| json!({"total_bytes": m.total, "available_bytes": m.available})),
            "accelerators": accelerators.iter().map(|a| a.to_json()).collect::<Vec<_>>(),
            "models": models,
            "orphans": orphans.iter().map(|(p, b)| json!({"path": p, "bytes": b})).collect::<Vec<_>>(),
            "orphan_bytes": orphan_bytes,
        })
    }

    /// `search_huggingface_models`: candidates with each variant's size and fit label.
    pub async fn search(&self, query: &str, limit: usize) -> Result<Json, DownloadError> {
        let hits = self.hub.search(query, limit).await?;
        let memory = self.memory();
        let accelerators = self.config.accelerators.detect().await;
        let mut tasks = tokio::task::JoinSet::new();
        for (i, hit) in hits.into_iter().take(limit).enumerate() {
            let hub = self.hub.clone();
            tasks.spawn(async move {
                let sized =
                    !hit.siblings.is_empty() && hit.siblings.iter().all(|s| s.size.is_some());
                let siblings = if sized {
                    hit.siblings.clone()
                } else {
                    match hub.repo_info(&hit.id, "main").await {
                        Ok(info) => info.siblings,
                        Err(_) => hit.siblings.clone(),
                    }
                };
                (i, hit, siblings)
            });
        }
        let mut rows = Vec::new();
        while let Some(Ok(row)) = tasks.join_next().await {
            rows.push(row);
        }
        rows.sort_by_key(|r| r.0);
        let downloaded: Vec<(String, String)> = self
            .store
            .manifests()
            .into_iter()
            .filter(|(_, m)| m.complete)
            .map(|(_, m)| (m.repo, m.variant))
            .collect();
        let order = |l: &str| match l {
            "fits_gpu" => 0,
            "fits_cpu" => 1,
            "fits_partial" => 2,
            "tight" => 3,
            "too_large" => 4,
            _ => 5,
        };
        let models: Vec<Json> = rows
            .into_iter()
            .map(|(_, hit, siblings)| {
                let variants: Vec<Json> = choose::variants(&siblings)
                    .into_iter()
                    .map(|v| {
                        // Unknown when the endpoint listed a file without its size: no
                        // made-up 0 bytes that "fits".
                        let bytes: Option<u64> = v
                            .files
                            .iter()
                            .map(|f| siblings.iter().find(|s| s.name == f.name).and_then(|s| s.size))
                            .sum();
                        let projector = v.files.iter().find(|f| {
                            crate::gguf::is_gguf(&f.name)
                                && crate::gguf::role(&f.name) == crate::gguf::Role::Projector
                        });
                        let placement = bytes.map(|b| fit::placement(b, memory, &accelerators));
                        json!({
                            "variant": v.variant,
                            "bytes": bytes,
                            "projector": projector.map(|f| &f.name),
                            "fit": placement.as_ref().map_or("unknown", |p| p.fit()),
                            "placement": placement.map(|p| p.to_json(&accelerators)),
                            "downloaded": downloaded.iter().any(|(r, var)| r == &hit.id && var == &v.variant),
                        })
                    })
                    .collect();
                let best = variants
                    .iter()
                    .filter_map(|v| v.pointer("/placement/label").and_then(Json::as_str))
                    .min_by_key(|l| order(l))
                    .unwrap_or("unknown")
                    .to_string();
                let fit = match best.as_str() {
                    "fits_gpu" | "fits_cpu" | "fits_partial" => "fits",
                    other => other,
                };
                json!({"repo": hit.id, "downloads": hit.downloads, "gated": hit.gated.to_json(), "fit": fit, "placement": best, "variants": variants})
            })
            .collect();
        Ok(
            json!({"query": query, "accelerators": accelerators.iter().map(|a| a.to_json()).collect::<Vec<_>>(), "models": models}),
        )
    }
}

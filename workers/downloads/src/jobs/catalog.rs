//! What the store holds and what the hub offers, as the tools answer them: `list_models` (each
//! model's size, files, completeness and fit on this machine's memory and accelerators) and
//! `search_huggingface_models`.

use std::path::{Path, PathBuf};

use toolvisor_protocol::results::{
    DeleteModelResult, Fit, HubModel, HubVariant, ListModelsResult, LoadState, MemoryFacts,
    OrphanFile, PlacementLabel, SearchModelsResult, StoredFile, StoredModel,
};

use super::{Downloads, lock};
use crate::error::DownloadError;
use crate::store::Manifest;
use crate::{choose, fit};

impl Downloads {
    /// The stored model `name` names, as `list_models` shows names (`owner/name`, with
    /// `@REVISION` or `:VARIANT` when the store has several), complete or not.
    pub fn find_stored(&self, name: &str) -> Result<(PathBuf, Manifest), DownloadError> {
        let manifests = self.store.manifests();
        let all: Vec<&(PathBuf, Manifest)> = manifests.iter().collect();
        match crate::store::pick(&all, name) {
            Ok(found) => Ok(found.clone()),
            Err(crate::store::Picked::None(have)) => Err(DownloadError::NotStored(format!(
                "no stored model is named {name:?} ({})",
                match have.is_empty() {
                    true => "the store holds no model".to_string(),
                    false => format!("the store has: {}", have.join(", ")),
                }
            ))),
            Err(crate::store::Picked::Several(names)) => Err(DownloadError::NotStored(format!(
                "{name:?} names {} stored models: {}; name one",
                names.len(),
                names.join(", ")
            ))),
        }
    }

    /// `delete_model`: remove the stored model in `dir` of `manifest` — its files that no
    /// other model of the directory lists, their partial downloads and range maps, its
    /// manifest, and the directories left empty. Refused while a download job of it has not
    /// ended (the caller refuses a loaded one). Blocking file work: call it off the async
    /// threads.
    pub fn delete_stored(
        &self,
        dir: &Path,
        manifest: &Manifest,
    ) -> Result<DeleteModelResult, DownloadError> {
        let running: Vec<String> = lock(&self.jobs)
            .values()
            .filter_map(|j| {
                let r = lock(&j.record);
                (r.state.unfinished() && j.dir == dir && r.variant == manifest.variant)
                    .then(|| r.id.clone())
            })
            .collect();
        if !running.is_empty() {
            return Err(DownloadError::InUse {
                what: format!(
                    "{}@{}:{} is being downloaded ({})",
                    manifest.repo,
                    crate::store::at(manifest),
                    manifest.variant,
                    running.join(", ")
                ),
                hint: format!(
                    "cancel_download {{\"job_id\": \"{}\"}} first, then delete it",
                    running[0]
                ),
            });
        }
        let _held = lock(&self.manifests);
        let others: std::collections::HashSet<String> = self
            .store
            .manifests()
            .into_iter()
            .filter(|(d, m)| d == dir && m.variant != manifest.variant)
            .flat_map(|(_, m)| m.files.into_iter().map(|f| f.name))
            .collect();
        let (mut removed, mut freed, mut kept) = (0u64, 0u64, Vec::new());
        for f in &manifest.files {
            if others.contains(&f.name) {
                kept.push(f.name.clone());
                continue;
            }
            let path = dir.join(&f.name);
            for p in [
                path.clone(),
                crate::partial::part_path(dir, &f.name),
                PathBuf::from(format!("{}.part.ranges", path.display())),
            ] {
                if let Ok(m) = std::fs::symlink_metadata(&p)
                    && m.is_file()
                {
                    std::fs::remove_file(&p)
                        .map_err(|e| DownloadError::io("cannot remove", &p, e))?;
                    removed += 1;
                    // A file another snapshot links (a commit that kept it) keeps its bytes.
                    if std::os::unix::fs::MetadataExt::nlink(&m) <= 1 {
                        freed += m.len();
                    }
                }
            }
        }
        self.store.remove_manifest(dir, manifest)?;
        // Directories left empty, from the files' own up to the repo's (a snapshot's: its
        // `snapshots` directory, then the repo's once no ref is left).
        let repo_dir = self.store.repo_dir(&manifest.repo);
        let snapshots = repo_dir.join("snapshots");
        let mut emptied: Vec<PathBuf> = manifest
            .files
            .iter()
            .filter_map(|f| dir.join(&f.name).parent().map(Path::to_path_buf))
            .collect();
        emptied.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        emptied.dedup();
        for d in emptied.iter().chain([dir.to_path_buf()].iter()) {
            let _ = std::fs::remove_dir(d);
        }
        if !dir.exists() {
            self.store.remove_refs_to(&manifest.repo, dir);
        }
        for d in [snapshots, repo_dir.join("refs"), repo_dir] {
            let _ = std::fs::remove_dir(d);
        }
        Ok(DeleteModelResult {
            model: format!(
                "{}@{}:{}",
                manifest.repo,
                crate::store::at(manifest),
                manifest.variant
            ),
            path: dir.display().to_string(),
            files_removed: removed,
            bytes_freed: freed,
            kept,
        })
    }

    fn memory(&self) -> Option<fit::Memory> {
        fit::read_memory(&self.config.meminfo)
    }

    /// `list_models`: the store's models with size, files, completeness and fit label.
    pub async fn models(&self) -> ListModelsResult {
        let memory = self.memory();
        let accelerators = self.config.accelerators.detect().await;
        let manifests = self.store.manifests();
        let all: Vec<&Manifest> = manifests.iter().map(|(_, m)| m).collect();
        let models = manifests
            .iter()
            .map(|(dir, m)| {
                let files = m
                    .files
                    .iter()
                    .map(|f| {
                        let (have, complete) = self.store.present(dir, f, m.verified(&f.name));
                        StoredFile {
                            name: f.name.clone(),
                            size: f.size,
                            bytes_present: have,
                            complete,
                        }
                    })
                    .collect();
                let size: u64 = m.files.iter().map(|f| f.size).sum();
                let complete = m
                    .files
                    .iter()
                    .all(|f| self.store.present(dir, f, m.verified(&f.name)).1);
                let placement = fit::placement(size, memory, &accelerators);
                StoredModel {
                    name: crate::store::short_name(m, &all),
                    repo: m.repo.clone(),
                    revision: m.revision.clone(),
                    commit: m.commit.clone(),
                    current: !m.refs.is_empty(),
                    variant: m.variant.clone(),
                    path: dir.display().to_string(),
                    size_bytes: size,
                    complete,
                    fit: placement.fit(),
                    placement: placement.shown(&accelerators),
                    load_state: LoadState::NotLoaded,
                    alias: None,
                    files,
                }
            })
            .collect();
        let store = self.store.clone();
        let orphans = tokio::task::spawn_blocking(move || store.orphans())
            .await
            .unwrap_or_default();
        let orphan_bytes: u64 = orphans.iter().map(|(_, b)| b).sum();
        ListModelsResult {
            store: self.store.root().display().to_string(),
            memory: memory.map(|m| MemoryFacts {
                total_bytes: m.total,
                available_bytes: m.available,
            }),
            accelerators: accelerators.iter().map(|a| a.shown()).collect(),
            models,
            orphans: orphans
                .into_iter()
                .map(|(path, bytes)| OrphanFile { path, bytes })
                .collect(),
            orphan_bytes,
        }
    }

    /// `search_huggingface_models`: candidates with each variant's size and fit label.
    pub async fn search(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<SearchModelsResult, DownloadError> {
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
        let order = |l: &PlacementLabel| match l {
            PlacementLabel::FitsGpu => 0,
            PlacementLabel::FitsCpu => 1,
            PlacementLabel::FitsPartial => 2,
            PlacementLabel::Tight => 3,
            PlacementLabel::TooLarge => 4,
            PlacementLabel::Unknown => 5,
        };
        let models = rows
            .into_iter()
            .map(|(_, hit, siblings)| {
                let variants: Vec<HubVariant> = choose::variants(&siblings)
                    .into_iter()
                    .map(|v| {
                        // Unknown when the endpoint listed a file without its size: no
                        // made-up 0 bytes that "fits".
                        let bytes: Option<u64> = v
                            .files
                            .iter()
                            .map(|f| {
                                siblings
                                    .iter()
                                    .find(|s| s.name == f.name)
                                    .and_then(|s| s.size)
                            })
                            .sum();
                        let projector = v.files.iter().find(|f| {
                            crate::gguf::is_gguf(&f.name)
                                && crate::gguf::role(&f.name) == crate::gguf::Role::Projector
                        });
                        let placement = bytes.map(|b| fit::placement(b, memory, &accelerators));
                        HubVariant {
                            downloaded: downloaded
                                .iter()
                                .any(|(r, var)| r == &hit.id && var == &v.variant),
                            variant: v.variant,
                            bytes,
                            projector: projector.map(|f| f.name.clone()),
                            fit: placement.as_ref().map_or(Fit::Unknown, |p| p.fit()),
                            placement: placement.map(|p| p.shown(&accelerators)),
                        }
                    })
                    .collect();
                let best = variants
                    .iter()
                    .filter_map(|v| v.placement.as_ref().map(|p| p.label))
                    .min_by_key(order)
                    .unwrap_or(PlacementLabel::Unknown);
                HubModel {
                    repo: hit.id,
                    downloads: hit.downloads,
                    gated: hit.gated.shown(),
                    fit: best.fit(),
                    placement: best,
                    variants,
                }
            })
            .collect();
        Ok(SearchModelsResult {
            query: query.to_string(),
            accelerators: accelerators.iter().map(|a| a.shown()).collect(),
            models,
        })
    }
}

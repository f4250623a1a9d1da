//! Whether an index-wide answer covers the project: the gaps toolvisor knows of (changes on
//! disk the server was not told of, a root nested in another, clangd without a compilation
//! database, jedi's cut search), marked `complete: false` with the reason.
//!
//! The answers concerned are references, implementations, workspace symbols and `lsp_rename`; a gap
//! shows as `complete: false`, `partial_reason` and a `(partial: …)` text line. Known today: clangd
//! without a `compile_commands.json`; pylsp when jedi's search is cut (names of 2 characters or
//! fewer, more than 30 files mentioning the name, or 2,000 Python files, counted by the same word
//! match on the identifier at the position, never the query's spelling); a server root nested
//! inside another root of its language within the workdir; changes on disk the server could not be
//! told of; a watcher that could not watch the whole root.

use std::path::Path;

use crate::answers::{show_dir, show_path};
use crate::locate;
use crate::lock;
use crate::outside::OPENED_PER_QUERY_MAX;
use crate::server::ServerShared;
use crate::servers::Servers;

impl Servers {
    /// Why an index-wide answer about `path` from `shared`, asked from `workdir`, may cover
    /// less than the project, and what fixes it; `None` when no gap is known. `symbol` is the
    /// identifier asked about (the word at the position, never the query's spelling);
    /// `enclosing_searched` when the servers of the roots enclosing `shared`'s were asked
    /// too and their answers merged (`crate::roots`), so nesting is no gap; `stubs_scanned`
    /// when the caller checks stubs itself with `hidden_uses::gap` (references, renames).
    ///
    /// Known gaps: the file watcher of the root could not watch it all; files changed on disk
    /// that the server could not be told of (`ServerShared::unseen`); the server's root is
    /// nested inside another root of its language within the workdir (a monorepo), whose
    /// other files the server does not search; and what [`server_gap`] knows of the server.
    pub(crate) async fn index_gap(
        &self,
        workdir: &Path,
        shared: &ServerShared,
        path: &Path,
        symbol: Option<&str>,
        enclosing_searched: bool,
        stubs_scanned: bool,
    ) -> Option<String> {
        let mut gaps = Vec::new();
        let problem = lock(&shared.watch).as_ref().and_then(|w| w.problem());
        if let Some(problem) = problem {
            gaps.push(problem);
        }
        let unseen: Vec<String> = lock(&shared.unseen)
            .iter()
            .map(|p| show_path(p, workdir))
            .collect();
        if !unseen.is_empty() {
            gaps.push(format!(
                "{} files changed on disk were not re-read by {} (more than {OPENED_PER_QUERY_MAX} at once): {}{}; `lsp reload` makes it read the disk anew",
                unseen.len(),
                shared.id,
                unseen.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
                if unseen.len() > 5 { ", …" } else { "" }
            ));
        }
        if !enclosing_searched
            && let Some(spec) = self.languages().get(&shared.language)
            && let Some(outer) = shared
                .root
                .parent()
                .and_then(|up| locate::find_root(up, &spec.markers))
                .filter(|outer| outer.starts_with(workdir))
        {
            gaps.push(format!(
                "the server's root {} is nested inside another {} root, {}: it searched {} only, not the rest of {}; ask from a file outside {} for that root's answer, or grep",
                show_dir(&shared.root, workdir),
                shared.language,
                show_dir(&outer, workdir),
                show_dir(&shared.root, workdir),
                show_dir(&outer, workdir),
                show_dir(&shared.root, workdir),
            ));
        }
        if let Some(gap) = server_gap(shared, path, symbol).await {
            gaps.push(gap);
        }
        // References and renames scan the stubs against the answer's own lines instead
        // (`hidden_uses::python`), which tells a stub that matters from one that does not.
        if !stubs_scanned && let Some(gap) = stub_gap(shared, path, workdir).await {
            gaps.push(gap);
        }
        (!gaps.is_empty()).then(|| gaps.join("; "))
    }

    /// What an answer about `word` asked from `opened` may miss, as one reason: the index's
    /// gaps ([`Servers::index_gap`], its stubs left to the scan) and the uses the
    /// server cannot see (`hidden_uses::gap`, given the answer's own lines `seen`, `missed`
    /// saying what a miss means, `calls` for a call hierarchy's callers).
    pub(crate) async fn use_gap(
        &self,
        ctx: &crate::call::CallCtx,
        opened: &crate::call::Opened,
        word: &str,
        seen: std::collections::HashSet<(std::path::PathBuf, u32)>,
        missed: &str,
        calls: bool,
    ) -> Option<String> {
        let gap = self
            .index_gap(
                &ctx.workdir,
                &opened.shared,
                &opened.path,
                Some(word),
                false,
                true,
            )
            .await;
        let hidden = self
            .hidden_gap(ctx, opened, word, seen, missed, calls)
            .await;
        crate::hidden_uses::join(gap, hidden)
    }

    /// The uses of `word` the server cannot see, asked from `opened`
    /// (`hidden_uses::gap`): the answer's own lines are `seen`, `missed` says what a miss
    /// means, `calls` for a call hierarchy's callers.
    pub(crate) async fn hidden_gap(
        &self,
        ctx: &crate::call::CallCtx,
        opened: &crate::call::Opened,
        word: &str,
        seen: std::collections::HashSet<(std::path::PathBuf, u32)>,
        missed: &str,
        calls: bool,
    ) -> Option<String> {
        crate::hidden_uses::gap(
            ctx,
            self,
            &opened.shared,
            crate::hidden_uses::Question {
                asked: &opened.path,
                word,
                seen,
                missed,
                calls,
            },
        )
        .await
    }
}

/// What toolvisor knows the server's index misses, whatever the project's state on disk.
///
/// clangd indexes in the background only the files its compilation database lists
/// (`compile_commands.json`, looked up in the file's directory, its parents up to the root and
/// their `build/` directories, as clangd does); with `compile_flags.txt` alone or no database
/// it knows only the files open in it and what they include, so `references` misses every
/// other file.
///
/// pylsp's references come from jedi, which has no index: it greps the project for the name
/// and stops after 30 files that mention it or 2,000 files opened, and does not look in other
/// files at all for names of 2 characters or fewer; the same count is made here (`symbol`:
/// the identifier asked about) to tell when that cut applies.
async fn server_gap(shared: &ServerShared, path: &Path, symbol: Option<&str>) -> Option<String> {
    if shared.flavor.pylsp {
        let symbol = symbol?.to_string();
        let root = shared.root.clone();
        return tokio::task::spawn_blocking(move || jedi_gap(&root, &symbol))
            .await
            .ok()
            .flatten();
    }
    if !shared.flavor.clangd {
        return None;
    }
    let (databases, root, path) = (
        shared.databases.clone(),
        shared.root.clone(),
        path.to_path_buf(),
    );
    let has_database = tokio::task::spawn_blocking(move || databases.lists_files(&root, &path))
        .await
        .unwrap_or(false);
    (!has_database).then(|| {
        "clangd indexes only the files listed in a compile_commands.json and this project has none that lists a file (compile_flags.txt alone is not a list of files): the answer covers only the files open in the server and what they include; create compile_commands.json in the root or build/ (CMake: -DCMAKE_EXPORT_COMPILE_COMMANDS=ON; make: `bear -- make`), then `lsp reload`".to_string()
    })
}

/// A Python module with a stub beside it (`mod.py` and `mod.pyi`): pyright resolves every use
/// of the module's names to the stub, so an index-wide question asked from the `.py` finds
/// only the `.py`'s own occurrences (a rename from there misses every caller), while the
/// same question asked from the stub finds the uses.
async fn stub_gap(shared: &ServerShared, path: &Path, workdir: &Path) -> Option<String> {
    if !shared.flavor.pyright || path.extension().is_none_or(|e| e != "py") {
        return None;
    }
    let stub = path.with_extension("pyi");
    // A stat, on the blocking pool like all of the lsp worker's file work.
    let probe = stub.clone();
    let exists = tokio::task::spawn_blocking(move || probe.is_file())
        .await
        .unwrap_or(false);
    exists.then(|| {
        format!(
            "{} has a stub beside it, {}: pyright resolves the module's uses to the stub, so this answer from {} misses them; ask the same question from the stub (`file`: {}, the line that declares the name) for the uses, or grep",
            show_path(path, workdir),
            show_path(&stub, workdir),
            show_path(path, workdir),
            show_path(&stub, workdir),
        )
    })
}

/// jedi's search limits (`jedi/inference/references.py`): files that mention the name it
/// parses, files it opens.
const JEDI_PARSED_FILES: usize = 30;
const JEDI_OPENED_FILES: usize = 2000;

/// Whether jedi's search for `symbol` under `root` is cut short (see [`server_gap`]): counts the
/// Python files and those mentioning `symbol` as a word, as jedi walks them (hidden
/// directories and jedi's ignored folders skipped), up to its limits.
fn jedi_gap(root: &Path, symbol: &str) -> Option<String> {
    if symbol.chars().count() <= 2 {
        return Some(format!(
            "pylsp (jedi) does not search other files for names of 2 characters or fewer, so `{symbol}` was looked up in this file only; use grep for the rest"
        ));
    }
    let word = |text: &str| {
        text.match_indices(symbol).any(|(i, _)| {
            let before = text[..i].chars().next_back();
            let after = text[i + symbol.len()..].chars().next();
            let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            !is_word(before) && !is_word(after)
        })
    };
    let (mut opened, mut mentioning) = (0usize, 0usize);
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                let ignored = [".tox", ".venv", ".mypy_cache", "venv", "__pycache__"];
                if !name.starts_with('.') && !ignored.contains(&name.as_str()) {
                    dirs.push(e.path());
                }
            } else if kind.is_file() && name.ends_with(".py") {
                opened += 1;
                if toolvisor_kit::special::read_to_string(&e.path()).is_ok_and(|t| word(&t)) {
                    mentioning += 1;
                }
                if mentioning > JEDI_PARSED_FILES || opened > JEDI_OPENED_FILES {
                    return Some(format!(
                        "pylsp (jedi) has no index: it searches at most {JEDI_PARSED_FILES} files that mention `{symbol}` and opens at most {JEDI_OPENED_FILES} Python files, and this project has more, so some files were not searched; use pyright (the default Python server) for complete references, or grep"
                    ));
                }
            }
        }
    }
    None
}

/// A rename's coverage: `complete` when no gap is known; the gap, if any, said at the end of
/// `text` (as [`mark_partial`] says it) and returned as the `partial_reason`.
pub(crate) fn covered(text: &mut String, gap: Option<String>) -> (bool, Option<String>) {
    let mut partial_reason = None;
    mark_partial(text, false, &mut partial_reason, gap);
    (partial_reason.is_none(), partial_reason)
}

/// Marks an index-wide answer with a known gap (`partial_reason`, and a `(partial: …)` text
/// line); a list found `empty` says the server found none but may have missed some.
pub(crate) fn mark_partial(
    text: &mut String,
    empty: bool,
    partial_reason: &mut Option<String>,
    gap: Option<String>,
) {
    if let Some(reason) = gap {
        if empty {
            *text = format!(
                "{}: the server found none, but its answer is partial, so there may be some\n",
                text.trim_end()
            );
        }
        text.push_str(&format!("(partial: {reason})\n"));
        *partial_reason = Some(reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_partial_answer_is_never_worded_as_none() {
        let mut text = "no references found for `f` at a.c:3\n".to_string();
        let mut reason = None;
        mark_partial(
            &mut text,
            true,
            &mut reason,
            Some("clangd has no compilation database".into()),
        );
        assert!(text.contains("there may be some"), "{text}");
        assert!(
            text.contains("(partial: clangd has no compilation database)"),
            "{text}"
        );
        assert_eq!(
            reason.as_deref(),
            Some("clangd has no compilation database")
        );
        // No gap: nothing said.
        let mut whole = "a.c:3: f()\n".to_string();
        let mut none = None;
        mark_partial(&mut whole, false, &mut none, None);
        assert_eq!((whole.as_str(), none), ("a.c:3: f()\n", None));
    }
}

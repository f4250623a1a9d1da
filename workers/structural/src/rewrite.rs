//! A rewrite proposal: the same matching as search, each match replaced by the rewrite
//! template with its metavariables substituted (`$$$` runs keep their text), giving the new
//! content of every touched file and a bounded unified-diff preview. Nothing is written here.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use ast_grep_core::replacer::TemplateFix;
use serde::Serialize;
use similar::TextDiff;

use crate::lang;
use crate::search::{SearchRequest, Skipped, Stats, Target, for_each_file, prepare};
use crate::{Error, Result};

/// One file's change.
#[derive(Clone, Debug)]
pub struct FileChange {
    pub path: PathBuf,
    /// The content when the change was computed (the snapshot accept compares with).
    pub before: String,
    pub after: String,
    pub replacements: usize,
}

/// Everything a rewrite would change.
#[derive(Debug)]
pub struct Proposal {
    pub language: &'static str,
    pub language_note: Option<String>,
    pub pattern_context: Option<String>,
    /// Files whose content changes, ordered by path.
    pub files: Vec<FileChange>,
    pub replacements: usize,
    /// Matches inside another match that is replaced: not rewritten (the outer
    /// replacement's metavariables carry their original text).
    pub nested: usize,
    /// Matches whose rewrite equals their text.
    pub unchanged: usize,
    pub files_searched: usize,
    pub files_parsed: usize,
    pub skipped: Vec<Skipped>,
    pub skipped_total: usize,
}

/// Compute the rewrite of every match of `req` (at most `req.max_results` replacements, else
/// [`Error::TooManyReplacements`]: a partial rewrite is never proposed).
pub fn propose(req: &SearchRequest, rewrite: &str) -> Result<Proposal> {
    let target = prepare(req)?;
    propose_target(req, &target, rewrite)
}

/// [`propose`] for a prepared target.
pub fn propose_target(req: &SearchRequest, target: &Target, rewrite: &str) -> Result<Proposal> {
    let compiled = &target.compiled;
    let fixer = match TemplateFix::try_new(rewrite, &compiled.lang) {
        Ok(fixer) => fixer,
        Err(never) => match never {},
    };
    let mut unbound: Vec<String> = fixer
        .used_vars()
        .into_iter()
        .filter(|v| !compiled.vars.iter().any(|b| b == v))
        .map(String::from)
        .collect();
    if !unbound.is_empty() {
        unbound.sort();
        return Err(Error::RewriteUnbound {
            unbound,
            bound: compiled.vars.clone(),
        });
    }
    let stats = Stats::default();
    let replacements = AtomicUsize::new(0);
    let nested = AtomicUsize::new(0);
    let unchanged = AtomicUsize::new(0);
    let files: Mutex<Vec<FileChange>> = Mutex::default();
    let max = req.max_results;
    for_each_file(target, req, &stats, |path, text| {
        let tree = lang::parse(&text, compiled.lang);
        let root = tree.root();
        let mut after = String::with_capacity(text.len());
        let mut copied = 0usize;
        let mut count = 0usize;
        for m in root.find_all(&compiled.pattern) {
            let edit = m.make_edit(&compiled.pattern, &fixer);
            let (start, end) = (edit.position, edit.position + edit.deleted_length);
            if start < copied {
                nested.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let inserted = String::from_utf8_lossy(&edit.inserted_text);
            if inserted == text[start..end] {
                unchanged.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            after.push_str(&text[copied..start]);
            after.push_str(&inserted);
            copied = end;
            count += 1;
        }
        if count == 0 {
            return;
        }
        after.push_str(&text[copied..]);
        let so_far = replacements.fetch_add(count, Ordering::Relaxed) + count;
        if so_far <= max {
            files
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(FileChange {
                    path: path.to_path_buf(),
                    before: text,
                    after,
                    replacements: count,
                });
        }
    })?;
    let replacements = replacements.into_inner();
    if replacements > max {
        return Err(Error::TooManyReplacements {
            found: replacements,
            max,
        });
    }
    let mut files = files.into_inner().unwrap_or_else(|p| p.into_inner());
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let (skipped_total, skipped) = stats.take_skipped();
    Ok(Proposal {
        language: lang::id(compiled.lang),
        language_note: target.language_note.clone(),
        pattern_context: compiled.context.clone(),
        files,
        replacements,
        nested: nested.into_inner(),
        unchanged: unchanged.into_inner(),
        files_searched: stats.files.into_inner(),
        files_parsed: stats.parsed.into_inner(),
        skipped,
        skipped_total,
    })
}

/// `path` relative to `base` when it is under it.
pub fn shown(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .ok()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A unified diff of the change, two lines of context, cut at a line boundary after about
/// `max_chars` characters. Returns the text and whether it was cut.
#[derive(Debug, Serialize)]
pub struct Preview {
    pub diff: String,
    pub truncated: bool,
    /// Diff lines left out when cut.
    pub omitted_lines: usize,
}

pub fn preview(files: &[FileChange], base: &Path, max_chars: usize) -> Preview {
    let mut diff = String::new();
    let mut used = 0usize;
    let mut omitted = 0usize;
    for file in files {
        let name = shown(&file.path, base);
        let text = TextDiff::from_lines(&file.before, &file.after)
            .unified_diff()
            .context_radius(2)
            .header(&format!("a/{name}"), &format!("b/{name}"))
            .to_string();
        for line in text.split_inclusive('\n') {
            let n = line.chars().count();
            if omitted > 0 || used + n > max_chars {
                omitted += 1;
                continue;
            }
            used += n;
            diff.push_str(line);
            if !line.ends_with('\n') {
                diff.push('\n');
            }
        }
    }
    if omitted > 0 {
        diff.push_str(&format!(
            "[… preview cut here: {omitted} more diff lines; accepting writes the whole change]\n"
        ));
    }
    Preview {
        diff,
        truncated: omitted > 0,
        omitted_lines: omitted,
    }
}

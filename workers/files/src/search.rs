//! `find` and `grep`: ignore-aware parallel walks (`ignore::WalkParallel`), glob matching
//! (`globset`) and line-oriented regex search (`grep-searcher`, `grep-regex`), all
//! in-process. Results are sorted by path so the same tree gives the same answer.
//!
//! Confinement of a walk: its start is resolved and checked like any path, the walk follows
//! no symlink, and every file `grep` reads is opened beneath the root it lies in
//! (`Scope::open_found`), so no content from outside is ever searched. The walker itself
//! lists directories by path: a directory swapped for a symlink mid-walk can make it list
//! an outside directory, so `find` keeps a match only when the same entry (inode) is found
//! beneath the root (`Scope::found_beneath`).
//!
//! `.gitignore` files met on the way are read by path: they only narrow a walk. A dropped call sets
//! the walk's cancel flag (`supervisor/src/tools/files.rs`), and every walk has a timeout.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};

use crate::Cancel;
use crate::error::{Error, Result};
use crate::paths::{Access, Scope};
use crate::protect::skipped_note;
use crate::text;

/// Bounds shared by `find` and `grep`.
#[derive(Clone, Copy, Debug)]
pub struct SearchLimits {
    /// A search still running after this stops and returns what it found (`timed_out`).
    pub timeout: Duration,
    /// Longer matching lines are cut.
    pub max_line_chars: usize,
    /// Walker threads; 0 = one per core.
    pub threads: usize,
}

impl Default for SearchLimits {
    fn default() -> Self {
        SearchLimits {
            timeout: Duration::from_secs(60),
            max_line_chars: 500,
            threads: 0,
        }
    }
}

/// Which files a walk visits.
#[derive(Clone, Copy, Debug, Default)]
pub struct Visibility {
    /// Include hidden files and directories (names starting with `.`).
    pub hidden: bool,
    /// Include files that `.gitignore`, `.ignore` and git's excludes name.
    pub ignored: bool,
}

const MAX_ERRORS: usize = 20;

/// What stopped a walk early, and the errors met on the way.
#[derive(Default)]
struct Control {
    cancel: Cancel,
    deadline: Option<Instant>,
    quit: AtomicBool,
    timed_out: AtomicBool,
    errors: Mutex<Vec<String>>,
}

impl Control {
    fn new(cancel: Cancel, timeout: Duration) -> Control {
        Control {
            cancel,
            deadline: Instant::now().checked_add(timeout),
            ..Control::default()
        }
    }

    fn stop(&self) -> bool {
        if self.quit.load(Ordering::Relaxed) || self.cancel.is_cancelled() {
            return true;
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.timed_out.store(true, Ordering::Relaxed);
            self.quit.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    fn error(&self, message: String) {
        let mut errors = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        if errors.len() < MAX_ERRORS {
            errors.push(message);
        }
    }

    fn finish(self) -> Result<(bool, Vec<String>)> {
        if self.cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        Ok((
            self.timed_out.into_inner(),
            self.errors.into_inner().unwrap_or_else(|p| p.into_inner()),
        ))
    }
}

/// The walk of `root`: protected locations (see `protect`) are neither yielded nor
/// descended into, and counted in `skipped`.
fn walker(
    root: &Path,
    vis: Visibility,
    threads: usize,
    scope: &Scope,
    skipped: &Arc<AtomicUsize>,
) -> WalkBuilder {
    let mut wb = WalkBuilder::new(root);
    wb.hidden(!vis.hidden)
        .ignore(!vis.ignored)
        .git_ignore(!vis.ignored)
        .git_global(!vis.ignored)
        .git_exclude(!vis.ignored)
        .parents(!vis.ignored)
        // A .gitignore counts even outside a git repository: the tree says what is noise.
        .require_git(false)
        .follow_links(false)
        .threads(threads);
    // git's own store is never source, unless hidden and ignored files are both asked for.
    let skip_git = !(vis.hidden && vis.ignored);
    let admits = scope.protected().walk_filter(skipped.clone());
    wb.filter_entry(move |e| !(skip_git && e.depth() > 0 && e.file_name() == ".git") && admits(e));
    wb
}

fn walk_error(scope: &Scope, err: ignore::Error) -> String {
    match &err {
        ignore::Error::WithPath { path, err } => format!("{}: {err}", scope.display(path)),
        _ => err.to_string(),
    }
}

// ---------------------------------------------------------------------------------------
// find

#[derive(Clone, Debug)]
pub struct FindRequest<'a> {
    /// A glob. Without `/` it matches file names (`*.rs`); with `/` it matches the path
    /// relative to the search directory (`src/**/*.rs`).
    pub pattern: &'a str,
    pub path: Option<&'a str>,
    pub visibility: Visibility,
    pub max_results: usize,
}

#[derive(Clone, Debug, Default)]
pub struct FindResult {
    pub path: String,
    /// Matching paths as the caller sees them, sorted; directories end in `/`.
    pub paths: Vec<String>,
    pub total: usize,
    pub truncated: bool,
    pub timed_out: bool,
    pub errors: Vec<String>,
    /// Protected paths left out (see `protect`); never named.
    pub skipped_protected: usize,
}

pub fn find(
    scope: &Scope,
    req: &FindRequest<'_>,
    limits: &SearchLimits,
    cancel: Cancel,
) -> Result<FindResult> {
    if req.pattern.is_empty() {
        return Err(Error::bad("pattern", "is empty; `*` matches every name"));
    }
    let resolved = scope.resolve(req.path.unwrap_or("."), Access::Read)?;
    if !resolved.metadata()?.is_dir() {
        return Err(Error::NotDir {
            path: resolved.display,
        });
    }
    let glob = globset::GlobBuilder::new(req.pattern.trim_start_matches("./"))
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| Error::bad("pattern", format!("{:?} is not a glob: {e}", req.pattern)))?
        .compile_matcher();
    let by_path = req.pattern.contains('/');
    let control = Control::new(cancel, limits.timeout);
    let shared = FindShared {
        scope,
        root: &resolved.real,
        glob,
        by_path,
        control: &control,
        found: Mutex::new(Vec::new()),
    };
    let protected = Arc::new(AtomicUsize::new(0));
    walker(
        &resolved.real,
        req.visibility,
        limits.threads,
        scope,
        &protected,
    )
    .build_parallel()
    .visit(&mut FindBuilder(&shared));
    let mut paths = shared.found.into_inner().unwrap_or_else(|p| p.into_inner());
    let (timed_out, errors) = control.finish()?;
    paths.sort_unstable();
    let total = paths.len();
    let truncated = total > req.max_results;
    paths.truncate(req.max_results);
    Ok(FindResult {
        path: resolved.display,
        paths,
        total,
        truncated,
        timed_out,
        errors,
        skipped_protected: protected.load(Ordering::Relaxed),
    })
}

struct FindShared<'s> {
    scope: &'s Scope,
    root: &'s Path,
    glob: globset::GlobMatcher,
    by_path: bool,
    control: &'s Control,
    found: Mutex<Vec<String>>,
}

struct FindBuilder<'s>(&'s FindShared<'s>);

impl<'s> ParallelVisitorBuilder<'s> for FindBuilder<'s> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(FindVisitor {
            shared: self.0,
            local: Vec::new(),
        })
    }
}

struct FindVisitor<'s> {
    shared: &'s FindShared<'s>,
    local: Vec<String>,
}

impl ParallelVisitor for FindVisitor<'_> {
    fn visit(&mut self, entry: std::result::Result<DirEntry, ignore::Error>) -> WalkState {
        let s = self.shared;
        if s.control.stop() {
            return WalkState::Quit;
        }
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                s.control.error(walk_error(s.scope, e));
                return WalkState::Continue;
            }
        };
        if entry.depth() == 0 {
            return WalkState::Continue;
        }
        let matched = if s.by_path {
            entry
                .path()
                .strip_prefix(s.root)
                .is_ok_and(|rel| s.glob.is_match(rel))
        } else {
            s.glob.is_match(entry.file_name())
        };
        if matched && s.scope.found_beneath(entry.path(), entry.ino()) {
            let mut shown = s.scope.display(entry.path());
            if entry.file_type().is_some_and(|t| t.is_dir()) {
                shown.push('/');
            }
            self.local.push(shown);
        }
        WalkState::Continue
    }
}

impl Drop for FindVisitor<'_> {
    fn drop(&mut self) {
        if !self.local.is_empty() {
            let mut found = self.shared.found.lock().unwrap_or_else(|p| p.into_inner());
            found.append(&mut self.local);
        }
    }
}

// ---------------------------------------------------------------------------------------
// grep

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Case {
    #[default]
    Sensitive,
    Insensitive,
    /// Insensitive unless the pattern has an uppercase letter.
    Smart,
}

#[derive(Clone, Debug)]
pub struct GrepRequest<'a> {
    pub pattern: &'a str,
    pub path: Option<&'a str>,
    /// Only files matching this glob (relative to the search directory, as `rg -g`).
    pub glob: Option<&'a str>,
    pub case: Case,
    pub context: usize,
    pub max_results: usize,
    pub visibility: Visibility,
    /// A match may span lines (`rg -U`): `\n` in the pattern matches a line break, and each
    /// file is searched whole in memory (within the searcher's 64 MiB heap limit).
    pub multiline: bool,
}

#[derive(Clone, Debug, Default)]
pub struct GrepResult {
    pub path: String,
    /// ripgrep's format: `path:line:text` for matches, `path-line-text` for context,
    /// `--` between groups; files in path order.
    pub output: String,
    pub matches: usize,
    pub files_with_matches: usize,
    pub files_searched: usize,
    pub skipped_binary: usize,
    /// Stopped at `max_results`.
    pub truncated: bool,
    pub timed_out: bool,
    pub errors: Vec<String>,
    pub notes: Vec<String>,
    /// Protected paths left out (see `protect`); never named.
    pub skipped_protected: usize,
}

pub fn grep(
    scope: &Scope,
    req: &GrepRequest<'_>,
    limits: &SearchLimits,
    cancel: Cancel,
) -> Result<GrepResult> {
    if req.pattern.is_empty() {
        return Err(Error::bad("pattern", "is empty"));
    }
    let resolved = scope.resolve(req.path.unwrap_or("."), Access::Read)?;
    let meta = resolved.metadata()?;
    if let Some(kind) = toolvisor_kit::special::kind_of(meta.file_type()) {
        return Err(Error::NotRegular {
            path: resolved.display,
            kind,
        });
    }
    let matcher = grep_matcher(req)?;
    let protected = Arc::new(AtomicUsize::new(0));
    let wb = walker(
        &resolved.real,
        req.visibility,
        limits.threads,
        scope,
        &protected,
    );
    let base = if meta.is_dir() {
        resolved.real.clone()
    } else {
        resolved
            .real
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/"))
    };
    let filter = req.glob.map(GlobFilter::new).transpose()?;
    let control = Control::new(cancel, limits.timeout);
    let shared = GrepShared {
        scope,
        base: &base,
        filter,
        matcher,
        context: req.context,
        multiline: req.multiline,
        max_results: req.max_results,
        max_line_chars: limits.max_line_chars,
        control: &control,
        matches: AtomicUsize::new(0),
        files_searched: AtomicUsize::new(0),
        skipped_binary: AtomicUsize::new(0),
        truncated: AtomicBool::new(false),
        found: Mutex::new(Vec::new()),
    };
    wb.build_parallel().visit(&mut GrepBuilder(&shared));
    let mut found = shared.found.into_inner().unwrap_or_else(|p| p.into_inner());
    let files_searched = shared.files_searched.into_inner();
    let skipped_binary = shared.skipped_binary.into_inner();
    let truncated = shared.truncated.into_inner();
    let (timed_out, errors) = control.finish()?;
    found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut result = GrepResult {
        path: resolved.display.clone(),
        output: grep_output(&found, req.context),
        matches: found.iter().map(|f| f.2).sum(),
        files_with_matches: found.len(),
        files_searched,
        skipped_binary,
        truncated,
        timed_out,
        errors,
        notes: Vec::new(),
        skipped_protected: protected.load(Ordering::Relaxed),
    };
    add_grep_notes(&mut result, req, limits, meta.is_dir(), &resolved.display);
    Ok(result)
}

/// The regex matcher of `req`'s pattern and case; `^` and `$` match at line boundaries.
fn grep_matcher(req: &GrepRequest<'_>) -> Result<RegexMatcher> {
    RegexMatcherBuilder::new()
        .case_insensitive(req.case == Case::Insensitive)
        .case_smart(req.case == Case::Smart)
        // `^` and `$` match at line boundaries, as in ripgrep; a line-oriented search also
        // forbids `\n` in a match, which only a multi-line one may have.
        .multi_line(true)
        .line_terminator((!req.multiline).then_some(b'\n'))
        .build(req.pattern)
        .map_err(|e| {
            let e = e.to_string();
            let more = if !req.multiline && e.contains(r#""\n""#) {
                " (a match spans lines only with `multiline: true`)"
            } else {
                ""
            };
            Error::bad("pattern", format!("not a valid regex: {e}{more}"))
        })
}

/// Every file's output in path order, with `--` between files when context lines are shown.
fn grep_output(found: &[(String, String, usize)], context: usize) -> String {
    let mut output = String::with_capacity(found.iter().map(|f| f.1.len() + 3).sum());
    for (i, (_, text, _)) in found.iter().enumerate() {
        if i > 0 && context > 0 {
            output.push_str("--\n");
        }
        output.push_str(text);
    }
    output
}

/// Says why the result is partial (`max_results`, the timeout), what binary files were not
/// searched, and that protected paths were left out.
fn add_grep_notes(
    result: &mut GrepResult,
    req: &GrepRequest<'_>,
    limits: &SearchLimits,
    is_dir: bool,
    display: &str,
) {
    if result.truncated {
        result.notes.push(format!(
            "stopped at max_results = {}: files are searched in parallel, so these are the matches found first, not the first in path order; narrow the pattern, path or glob, or raise max_results",
            req.max_results
        ));
    }
    if result.timed_out {
        result.notes.push(format!(
            "stopped after the {} s search timeout; the matches shown are partial",
            limits.timeout.as_secs()
        ));
    }
    if !is_dir && result.skipped_binary > 0 {
        result
            .notes
            .push(format!("{display} is a binary file; it was not searched"));
    } else if result.skipped_binary > 0 {
        result
            .notes
            .push(format!("{} binary file(s) skipped", result.skipped_binary));
    }
    if result.skipped_protected > 0 {
        result.notes.push(skipped_note(result.skipped_protected));
    }
}

struct GrepShared<'s> {
    scope: &'s Scope,
    base: &'s Path,
    filter: Option<GlobFilter>,
    matcher: RegexMatcher,
    context: usize,
    multiline: bool,
    max_results: usize,
    max_line_chars: usize,
    control: &'s Control,
    matches: AtomicUsize,
    files_searched: AtomicUsize,
    skipped_binary: AtomicUsize,
    truncated: AtomicBool,
    /// (shown path, output, matches) per file with matches.
    found: Mutex<Vec<(String, String, usize)>>,
}

/// `grep`'s `glob`: comma-separated globs, `!` excludes. A glob without `/` matches file
/// names, one with `/` the path relative to the search directory. Unlike `rg -g`, it never
/// brings back hidden or ignored files: it only narrows.
struct GlobFilter {
    include: Vec<(globset::GlobMatcher, bool)>,
    exclude: Vec<(globset::GlobMatcher, bool)>,
}

impl GlobFilter {
    fn new(spec: &str) -> Result<GlobFilter> {
        let mut f = GlobFilter {
            include: Vec::new(),
            exclude: Vec::new(),
        };
        for g in spec.split(',').map(str::trim).filter(|g| !g.is_empty()) {
            let (negated, g) = match g.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, g),
            };
            let g = g.trim_start_matches("./");
            let m = globset::GlobBuilder::new(g)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| Error::bad("glob", format!("{g:?} is not a glob: {e}")))?
                .compile_matcher();
            let by_path = g.contains('/');
            if negated {
                f.exclude.push((m, by_path));
            } else {
                f.include.push((m, by_path));
            }
        }
        if f.include.is_empty() && f.exclude.is_empty() {
            return Err(Error::bad("glob", "names no glob"));
        }
        Ok(f)
    }

    fn allows(&self, rel: &Path, name: &std::ffi::OsStr) -> bool {
        let hit = |(m, by_path): &(globset::GlobMatcher, bool)| {
            if *by_path {
                m.is_match(rel)
            } else {
                m.is_match(name)
            }
        };
        (self.include.is_empty() || self.include.iter().any(hit)) && !self.exclude.iter().any(hit)
    }
}

struct GrepBuilder<'s>(&'s GrepShared<'s>);

impl<'s> ParallelVisitorBuilder<'s> for GrepBuilder<'s> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        let s = self.0;
        let searcher = SearcherBuilder::new()
            .line_number(true)
            .before_context(s.context)
            .after_context(s.context)
            .multi_line(s.multiline)
            .binary_detection(BinaryDetection::quit(0))
            .heap_limit(Some(64 * 1024 * 1024))
            .build();
        Box::new(GrepVisitor {
            shared: s,
            searcher,
            local: Vec::new(),
        })
    }
}

struct GrepVisitor<'s> {
    shared: &'s GrepShared<'s>,
    searcher: Searcher,
    local: Vec<(String, String, usize)>,
}

impl ParallelVisitor for GrepVisitor<'_> {
    fn visit(&mut self, entry: std::result::Result<DirEntry, ignore::Error>) -> WalkState {
        let s = self.shared;
        if s.control.stop() {
            return WalkState::Quit;
        }
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                s.control.error(walk_error(s.scope, e));
                return WalkState::Continue;
            }
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return WalkState::Continue;
        }
        if let Some(filter) = &s.filter {
            let rel = entry.path().strip_prefix(s.base).unwrap_or(entry.path());
            if !filter.allows(rel, entry.file_name()) {
                return WalkState::Continue;
            }
        }
        s.files_searched.fetch_add(1, Ordering::Relaxed);
        let mut sink = FileSink {
            shared: s,
            shown: s.scope.display(entry.path()),
            out: String::new(),
            matches: 0,
            binary: false,
        };
        let searched = s
            .scope
            .open_found(entry.path())
            .and_then(|file| self.searcher.search_file(&s.matcher, &file, &mut sink));
        if let Err(e) = searched {
            s.control
                .error(format!("{}: {e}", s.scope.display(entry.path())));
        }
        if sink.binary {
            s.skipped_binary.fetch_add(1, Ordering::Relaxed);
            s.matches.fetch_sub(sink.matches, Ordering::Relaxed);
        } else if sink.matches > 0 {
            self.local.push((sink.shown, sink.out, sink.matches));
        }
        if s.control.stop() {
            WalkState::Quit
        } else {
            WalkState::Continue
        }
    }
}

impl Drop for GrepVisitor<'_> {
    fn drop(&mut self) {
        if !self.local.is_empty() {
            let mut found = self.shared.found.lock().unwrap_or_else(|p| p.into_inner());
            found.append(&mut self.local);
        }
    }
}

struct FileSink<'s> {
    shared: &'s GrepShared<'s>,
    shown: String,
    out: String,
    matches: usize,
    binary: bool,
}

impl FileSink<'_> {
    fn line(&mut self, sep: char, number: Option<u64>, bytes: &[u8]) {
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let (decoded, _) = text::decode_lossy(bytes);
        let (line, _) = text::cut_line(&decoded, self.shared.max_line_chars);
        let _ = writeln!(
            self.out,
            "{}{sep}{}{sep}{line}",
            self.shown,
            number.unwrap_or(0)
        );
    }
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _: &Searcher,
        m: &SinkMatch<'_>,
    ) -> std::result::Result<bool, std::io::Error> {
        let s = self.shared;
        // A match over several lines (multiline) shows each, numbered from its first, and
        // counts each as a matching line (as `rg -U`).
        let lines: Vec<&[u8]> = m.lines().collect();
        let n = lines.len().max(1);
        let before = s.matches.fetch_add(n, Ordering::Relaxed);
        let room = s.max_results.saturating_sub(before).min(n);
        if room < n {
            s.matches.fetch_sub(n - room, Ordering::Relaxed);
            s.truncated.store(true, Ordering::Relaxed);
            s.control.quit.store(true, Ordering::Relaxed);
        }
        if room == 0 {
            return Ok(false);
        }
        self.matches += room;
        let first = m.line_number();
        for (i, line) in lines.into_iter().take(room).enumerate() {
            self.line(':', first.map(|n| n + i as u64), line);
        }
        if room < n {
            return Ok(false);
        }
        Ok(!s.control.stop())
    }

    fn context(
        &mut self,
        _: &Searcher,
        c: &SinkContext<'_>,
    ) -> std::result::Result<bool, std::io::Error> {
        self.line('-', c.line_number(), c.bytes());
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> std::result::Result<bool, std::io::Error> {
        self.out.push_str("--\n");
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> std::result::Result<bool, std::io::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, Scope) {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        std::fs::create_dir_all(r.join("src/deep")).unwrap();
        std::fs::create_dir_all(r.join("target")).unwrap();
        std::fs::create_dir_all(r.join(".git")).unwrap();
        std::fs::write(r.join(".gitignore"), "target/\n*.log\n").unwrap();
        std::fs::write(r.join("src/main.rs"), "fn main() {\n    hello();\n}\n").unwrap();
        std::fs::write(r.join("src/deep/lib.rs"), "pub fn hello() {}\n// Hello\n").unwrap();
        std::fs::write(r.join("target/out.rs"), "fn hello() {}\n").unwrap();
        std::fs::write(r.join("debug.log"), "hello log\n").unwrap();
        std::fs::write(r.join(".env.rs"), "hello hidden\n").unwrap();
        std::fs::write(r.join(".git/config.rs"), "hello git\n").unwrap();
        std::fs::write(r.join("blob.bin"), b"hello\0binary").unwrap();
        std::fs::write(r.join("latin1.txt"), b"hello caf\xe9\n").unwrap();
        let s = Scope::new(r, &[], false).unwrap();
        (dir, s)
    }

    fn find_names(s: &Scope, pattern: &str, vis: Visibility) -> Vec<String> {
        let req = FindRequest {
            pattern,
            path: None,
            visibility: vis,
            max_results: 100,
        };
        find(s, &req, &SearchLimits::default(), Cancel::default())
            .unwrap()
            .paths
    }

    #[test]
    fn find_respects_ignores_and_hidden() {
        let (_d, s) = tree();
        assert_eq!(
            find_names(&s, "*.rs", Visibility::default()),
            ["src/deep/lib.rs", "src/main.rs"]
        );
        let all = Visibility {
            hidden: true,
            ignored: true,
        };
        assert_eq!(
            find_names(&s, "*.rs", all),
            [
                ".env.rs",
                ".git/config.rs",
                "src/deep/lib.rs",
                "src/main.rs",
                "target/out.rs"
            ]
        );
        let hidden = Visibility {
            hidden: true,
            ignored: false,
        };
        assert_eq!(
            find_names(&s, "*.rs", hidden),
            [".env.rs", "src/deep/lib.rs", "src/main.rs"]
        );
        assert_eq!(
            find_names(&s, "src/**/*.rs", Visibility::default()).len(),
            2
        );
        assert_eq!(find_names(&s, "deep", Visibility::default()), ["src/deep/"]);
        let bad = FindRequest {
            pattern: "a[",
            path: None,
            visibility: Visibility::default(),
            max_results: 1,
        };
        assert!(matches!(
            find(&s, &bad, &SearchLimits::default(), Cancel::default()),
            Err(Error::BadArgs { .. })
        ));
    }

    fn grep_req(pattern: &str) -> GrepRequest<'_> {
        GrepRequest {
            pattern,
            path: None,
            glob: None,
            case: Case::Sensitive,
            context: 0,
            max_results: 100,
            multiline: false,
            visibility: Visibility::default(),
        }
    }

    /// A FIFO named as `grep`'s path is refused, naming its type (the old code answered an
    /// empty search); over a directory the walk passes it by, never opening it.
    #[test]
    fn grep_refuses_a_named_fifo_and_walks_past_one() {
        let (d, s) = tree();
        let made = std::process::Command::new("mkfifo")
            .arg(d.path().join("src/pipe.rs"))
            .status()
            .unwrap();
        assert!(made.success());
        let named = GrepRequest {
            path: Some("src/pipe.rs"),
            ..grep_req("hello")
        };
        match grep(&s, &named, &SearchLimits::default(), Cancel::default()) {
            Err(Error::NotRegular { path, kind }) => {
                assert_eq!(
                    (path.as_str(), kind),
                    ("src/pipe.rs", "a FIFO (named pipe)")
                );
            }
            other => panic!("a named FIFO was not refused: {other:?}"),
        }
        let over = GrepRequest {
            path: Some("src"),
            ..grep_req("hello")
        };
        let r = grep(&s, &over, &SearchLimits::default(), Cancel::default()).unwrap();
        assert_eq!(r.files_searched, 2, "{}", r.output);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
    }

    #[test]
    fn grep_finds_sorted_skips_binary_and_ignored() {
        let (_d, s) = tree();
        let r = grep(
            &s,
            &grep_req("hello"),
            &SearchLimits::default(),
            Cancel::default(),
        )
        .unwrap();
        assert_eq!(
            r.output,
            "latin1.txt:1:hello caf\u{FFFD}\nsrc/deep/lib.rs:1:pub fn hello() {}\nsrc/main.rs:2:    hello();\n"
        );
        assert_eq!(
            (r.matches, r.files_with_matches, r.skipped_binary),
            (3, 3, 1)
        );
        let mut req = grep_req("hello");
        req.case = Case::Smart;
        req.glob = Some("*.rs");
        let r = grep(&s, &req, &SearchLimits::default(), Cancel::default()).unwrap();
        assert_eq!(r.matches, 3, "{}", r.output);
        let mut req = grep_req("hello");
        req.context = 1;
        req.path = Some("src/main.rs");
        let r = grep(&s, &req, &SearchLimits::default(), Cancel::default()).unwrap();
        assert_eq!(
            r.output,
            "src/main.rs-1-fn main() {\nsrc/main.rs:2:    hello();\nsrc/main.rs-3-}\n"
        );
        let mut req = grep_req("hello");
        req.max_results = 1;
        let r = grep(&s, &req, &SearchLimits::default(), Cancel::default()).unwrap();
        assert!(r.truncated && r.matches == 1);
        assert!(matches!(
            grep(
                &s,
                &grep_req("("),
                &SearchLimits::default(),
                Cancel::default()
            ),
            Err(Error::BadArgs { .. })
        ));
    }

    #[test]
    fn grep_multiline_matches_across_lines_and_anchors_stay_per_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.rs"),
            "fn one() {\n    body();\n}\nfn two() {}\nlet x = fn_like;\n",
        )
        .unwrap();
        let s = Scope::new(dir.path(), &[], false).unwrap();
        let run = |req: &GrepRequest<'_>| {
            grep(&s, req, &SearchLimits::default(), Cancel::default()).unwrap()
        };
        // Without `multiline` a pattern with a line break is refused (as by rg without -U),
        // saying so; with it, the match is shown line by line from its first line.
        let mut req = grep_req(r"one\(\) \{\n\s+body");
        let e = grep(&s, &req, &SearchLimits::default(), Cancel::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("multiline: true"), "{e}");
        req.multiline = true;
        let r = run(&req);
        assert_eq!(r.output, "a.rs:1:fn one() {\na.rs:2:    body();\n");
        assert_eq!((r.matches, r.files_with_matches), (2, 1));
        // `max_results` counts lines, and cuts inside a match.
        req.max_results = 1;
        let r = run(&req);
        assert_eq!(
            (r.output.as_str(), r.matches, r.truncated),
            ("a.rs:1:fn one() {\n", 1, true)
        );
        // `^` and `$` are line anchors in both modes.
        for multiline in [false, true] {
            let mut req = grep_req("^fn");
            req.multiline = multiline;
            let r = run(&req);
            assert_eq!(
                r.output, "a.rs:1:fn one() {\na.rs:4:fn two() {}\n",
                "multiline {multiline}"
            );
            let mut req = grep_req(r"\}$");
            req.multiline = multiline;
            assert_eq!(run(&req).matches, 2, "multiline {multiline}");
        }
    }
}

//! Structural search: pick the language, walk the tree ignore-aware and in parallel, skip
//! files that lack the pattern's literal text before parsing them, match, and keep the first
//! `max_results` matches in path order together with the exact total.
//!
//! Every file the walk reads is opened beneath the root through the call's `Scope`
//! (`Scope::open_found`), never by name: the walk follows no symbolic link, leaves protected
//! locations out (`Protected::walk_filter`), and lists by path, so a directory swapped for a
//! symbolic link after the listing is skipped ("outside the file scope … not followed"), never
//! followed out. `search_cached` answers unchanged files from `crate::cache`. The prefilter skips a
//! file only when it lacks the text of a named token of the pattern, which ast-grep compares
//! verbatim: it changes which files are parsed, never the matches (`tests/prefilter.rs`).

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BTreeMap, BinaryHeap};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ast_grep_core::NodeMatch;
use ast_grep_core::tree_sitter::StrDoc;
use ast_grep_language::SupportLang;
use ignore::{WalkBuilder, WalkState};
use memchr::memmem;
use serde::Serialize;

use toolvisor_files::Scope;

use crate::budget::{self, Limits, Refused};
use crate::cache::{Outcome, SearchCache};
use crate::lang::{self, CompiledPattern};
use crate::{Error, Match, Result, bounded};

/// Files larger than this are not parsed (listed in `skipped`).
pub const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;
/// Characters of a match's text kept in a result.
pub const MATCH_TEXT_CHARS: usize = 400;
/// Characters of one capture kept in a result.
pub const CAPTURE_CHARS: usize = 200;
/// Skipped files listed by name (the count is always exact).
const SKIPPED_LISTED: usize = 20;

/// What to search.
pub struct SearchRequest<'a> {
    pub pattern: &'a str,
    /// A grammar id or alias; inferred from `path` when absent.
    pub language: Option<&'a str>,
    /// An absolute file or directory, resolved in `scope`.
    pub path: &'a Path,
    /// The call's file scope: every file the walk finds is opened beneath the root it lies
    /// in (`Scope::open_found`), never by name, so a directory swapped for a symbolic link
    /// after the listing is not followed out.
    pub scope: &'a Scope,
    pub max_results: usize,
    /// Skip files lacking the pattern's literal text before parsing (on in production;
    /// off only to prove it changes nothing).
    pub prefilter: bool,
    pub threads: usize,
    /// Set by the caller to stop the walk early (the call was cancelled).
    pub cancel: Option<&'a AtomicBool>,
    /// The daemon's parse budget and the minified-file rule.
    pub limits: Limits,
}

/// The language and compiled pattern of a request, and where to look.
pub struct Target {
    pub compiled: CompiledPattern,
    /// How the language was chosen when the caller did not name it.
    pub language_note: Option<String>,
    pub root: PathBuf,
    pub is_file: bool,
}

impl Target {
    pub fn lang(&self) -> SupportLang {
        self.compiled.lang
    }
}

/// A file that was not searched, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    pub path: PathBuf,
    pub why: String,
}

/// The answer to a search.
#[derive(Debug, Serialize)]
pub struct SearchResult {
    pub language: &'static str,
    pub language_note: Option<String>,
    pub pattern_context: Option<String>,
    /// The first `max_results` matches, ordered by path and position.
    pub matches: Vec<Match>,
    /// Every match, including those not shown.
    pub total: usize,
    pub truncated: bool,
    /// Files of the language under the path (after ignore rules).
    pub files_searched: usize,
    /// Of those, the files that had to be parsed (the others lack the pattern's literal text).
    pub files_parsed: usize,
    /// Of those, the files answered from what an earlier search of the same pattern found in
    /// the same version of the file (not read again).
    pub files_cached: usize,
    pub files_matched: usize,
    pub skipped: Vec<Skipped>,
    pub skipped_total: usize,
}

/// Pick the language, compile the pattern and check the path.
pub fn prepare(req: &SearchRequest) -> Result<Target> {
    let meta = std::fs::metadata(req.path).map_err(|_| Error::PathNotFound {
        path: req.path.to_path_buf(),
    })?;
    if let Some(kind) = toolvisor_kit::special::kind_of(meta.file_type()) {
        return Err(Error::NotRegular {
            path: req.path.to_path_buf(),
            kind,
        });
    }
    let is_file = !meta.is_dir();
    let (lang, language_note) = match req.language {
        Some(given) => (lang::parse_language(given)?, None),
        None if is_file => match lang::from_path(req.path) {
            Some(lang) => (lang, None),
            None => {
                return Err(Error::LanguageUnknownForFile {
                    path: req.path.to_path_buf(),
                });
            }
        },
        None => infer_language(req)?,
    };
    let compiled = lang::compile(req.pattern, lang)?;
    if is_file
        && meta.len() > req.limits.minified_bytes
        && let Ok(mut file) = req.scope.open_found(req.path)
        && let Some(why) = req.limits.minified_file(&mut file, meta.len())
    {
        return Err(Error::Minified {
            path: req.path.to_path_buf(),
            why,
        });
    }
    Ok(Target {
        compiled,
        language_note,
        root: req.path.to_path_buf(),
        is_file,
    })
}

/// For a directory without `language`: the language of its code files, when that is
/// unambiguous — one language present, or exactly one of those present in which the
/// pattern parses. Prose and data files (Markdown, JSON, YAML, HTML) are counted, not
/// candidates ([`lang::is_prose_or_data`]).
fn infer_language(req: &SearchRequest) -> Result<(SupportLang, Option<String>)> {
    let counts: Mutex<BTreeMap<&'static str, (SupportLang, usize)>> = Mutex::default();
    walker(req.path, req.threads, req.scope).run(|| {
        Box::new(|entry| {
            if let Ok(entry) = entry
                && entry.file_type().is_some_and(|t| t.is_file())
                && let Some(lang) = lang::from_path(entry.path())
            {
                let mut counts = counts.lock().unwrap_or_else(|p| p.into_inner());
                counts.entry(lang::id(lang)).or_insert((lang, 0)).1 += 1;
            }
            WalkState::Continue
        })
    });
    let counts = counts.into_inner().unwrap_or_else(|p| p.into_inner());
    let (mut found, mut prose): (Vec<_>, Vec<_>) = counts
        .into_iter()
        .map(|(id, (l, n))| (id, l, n))
        .partition(|(_, l, _)| !lang::is_prose_or_data(*l));
    prose.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    found.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    let listed = |found: &[(&'static str, SupportLang, usize)]| {
        found
            .iter()
            .map(|(id, _, n)| format!("{id} ({n})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let [(id, lang, n)] = found.as_slice() {
        return Ok((
            *lang,
            Some(format!(
                "language inferred: {id}, the only language of the {n} files here"
            )),
        ));
    }
    let accepting: Vec<&(&'static str, SupportLang, usize)> = found
        .iter()
        .filter(|(_, l, _)| lang::compile(req.pattern, *l).is_ok())
        .collect();
    if let [(id, lang, _)] = accepting.as_slice() {
        return Ok((
            *lang,
            Some(format!(
                "language inferred: {id}, the only language here in which the pattern parses (files: {})",
                listed(&found)
            )),
        ));
    }
    Err(Error::LanguageRequired {
        path: req.path.to_path_buf(),
        found: found.iter().map(|(id, _, n)| (*id, *n)).collect(),
        accepting: accepting.iter().map(|(id, _, _)| *id).collect(),
        prose: prose.iter().map(|(id, _, n)| (*id, *n)).collect(),
    })
}

/// The ignore-aware parallel walker: `.gitignore` (inside a git repository), `.ignore`,
/// global git excludes, hidden files and directories skipped; symbolic links not followed
/// (a link is neither descended into nor read, so a walk from a real root never leaves it:
/// the daemon's file scope checks the root, and nothing below it can point elsewhere).
/// Files are picked by extension in the visitor, not with the walker's file types: a type
/// match would whitelist hidden files.
///
/// The scope's protected locations (a sensitive data-hub collection's folder) are neither
/// descended into nor yielded: left out silently, never listed as skipped.
fn walker(root: &Path, threads: usize, scope: &Scope) -> ignore::WalkParallel {
    let left_out = std::sync::Arc::new(AtomicUsize::new(0));
    WalkBuilder::new(root)
        .follow_links(false)
        .threads(threads.max(1))
        .filter_entry(scope.protected().walk_filter(left_out))
        .build_parallel()
}

/// Literal texts a file must contain to be able to match.
pub(crate) struct Prefilter {
    finders: Vec<memmem::Finder<'static>>,
}

impl Prefilter {
    pub(crate) fn new(literals: &[String]) -> Option<Prefilter> {
        if literals.is_empty() {
            return None;
        }
        let mut literals = literals.to_vec();
        // Longer literals are rarer: test them first.
        literals.sort_by_key(|l| std::cmp::Reverse(l.len()));
        Some(Prefilter {
            finders: literals
                .iter()
                .map(|l| memmem::Finder::new(l.as_bytes()).into_owned())
                .collect(),
        })
    }

    pub(crate) fn may_match(&self, haystack: &[u8]) -> bool {
        self.finders.iter().all(|f| f.find(haystack).is_some())
    }
}

/// What reading one file gave.
pub(crate) enum Read {
    Text(String),
    /// Lacks a literal of the pattern: cannot match.
    Filtered,
    Skipped(String),
}

/// Open and read one found file (the walk opens, takes room in the budget, then reads).
#[cfg(test)]
pub(crate) fn read_file(scope: &Scope, path: &Path, prefilter: Option<&Prefilter>) -> Read {
    match open_file(scope, path) {
        Ok((file, _)) => read_opened(file, prefilter, &Limits::default()),
        Err(why) => Read::Skipped(why),
    }
}

/// Open a found file beneath the scope and check its size: the file and its metadata, or why
/// it is skipped.
pub(crate) fn open_file(
    scope: &Scope,
    path: &Path,
) -> std::result::Result<(std::fs::File, std::fs::Metadata), String> {
    // Opened beneath the scope's root with no symbolic link followed (`openat2`
    // `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`): the walk lists by path, and a file or a
    // directory on its path swapped for a link between the listing and the read is not
    // followed (the daemon checked the root against the file scope, not every file below it).
    let file = match scope.open_found(path) {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32) => {
            return Err("a symbolic link (not followed)".into());
        }
        Err(e) if e.raw_os_error() == Some(nix::errno::Errno::EXDEV as i32) => {
            return Err(
                "outside the file scope (a directory on its path is a symbolic link now; not followed)"
                    .into(),
            );
        }
        // Swapped for a FIFO, socket or device since the walk listed it: not opened.
        Err(e) if let Some(kind) = toolvisor_kit::special::not_regular(&e) => {
            return Err(format!("{kind}, not a regular file (not opened)"));
        }
        Err(e) => return Err(format!("unreadable: {e}")),
    };
    match file.metadata() {
        Ok(meta) if meta.len() > MAX_FILE_BYTES => Err(format!(
            "larger than {} MiB ({} bytes)",
            MAX_FILE_BYTES >> 20,
            meta.len()
        )),
        Ok(meta) => Ok((file, meta)),
        Err(e) => Err(format!("unreadable: {e}")),
    }
}

/// Read an opened file: its text, or that it lacks the pattern's literals, or why it is
/// skipped (a minified file is, after the prefilter: one that cannot match is not listed).
pub(crate) fn read_opened(
    mut file: std::fs::File,
    prefilter: Option<&Prefilter>,
    limits: &Limits,
) -> Read {
    let mut bytes = Vec::new();
    if let Err(e) = file.read_to_end(&mut bytes) {
        return Read::Skipped(format!("unreadable: {e}"));
    }
    if let Some(filter) = prefilter
        && !filter.may_match(&bytes)
    {
        return Read::Filtered;
    }
    if let Some(why) = limits.minified_text(&bytes) {
        return Read::Skipped(why);
    }
    match String::from_utf8(bytes) {
        Ok(text) => Read::Text(text),
        Err(_) => Read::Skipped("not UTF-8 text".into()),
    }
}

/// Counters shared by the walker's threads.
#[derive(Default)]
pub(crate) struct Stats {
    pub files: AtomicUsize,
    pub parsed: AtomicUsize,
    pub matched: AtomicUsize,
    pub skipped: Mutex<(usize, Vec<Skipped>)>,
    /// Why the walk stopped early (no room in the parse budget, or cancelled while waiting).
    pub failed: Mutex<Option<Error>>,
    stop: AtomicBool,
}

impl Stats {
    /// Stop the walk, failing the call with `error` (the first one wins).
    pub(crate) fn fail(&self, error: Error) {
        let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        if failed.is_none() {
            *failed = Some(error);
        }
        self.stop.store(true, Ordering::Relaxed);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn take_failure(&self) -> Option<Error> {
        self.failed.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    pub(crate) fn skip(&self, path: &Path, why: String) {
        let mut s = self.skipped.lock().unwrap_or_else(|p| p.into_inner());
        s.0 += 1;
        if s.1.len() < SKIPPED_LISTED {
            s.1.push(Skipped {
                path: path.to_path_buf(),
                why,
            });
        }
    }

    pub(crate) fn take_skipped(&self) -> (usize, Vec<Skipped>) {
        let mut s = self.skipped.lock().unwrap_or_else(|p| p.into_inner());
        let mut listed = std::mem::take(&mut s.1);
        listed.sort_by(|a, b| a.path.cmp(&b.path));
        (s.0, listed)
    }
}

/// Run `visit` on every file of the target's language under its root (in parallel), with
/// the file's text; files the prefilter rules out, unreadable and oversized ones are
/// counted in `stats` and not visited. An explicitly named file is visited whatever the
/// ignore rules say.
pub(crate) fn for_each_file<F>(
    target: &Target,
    req: &SearchRequest,
    stats: &Stats,
    visit: F,
) -> Result<()>
where
    F: Fn(&Path, String) + Sync,
{
    let filter = if req.prefilter {
        Prefilter::new(&target.compiled.literals)
    } else {
        None
    };
    let one = |path: &Path| {
        stats.files.fetch_add(1, Ordering::Relaxed);
        let (file, meta) = match open_file(req.scope, path) {
            Ok(opened) => opened,
            Err(why) => return stats.skip(path, why),
        };
        let Some(_permit) = room(req, path, meta.len(), stats) else {
            return;
        };
        match read_opened(file, filter.as_ref(), &req.limits) {
            Read::Text(text) => {
                stats.parsed.fetch_add(1, Ordering::Relaxed);
                visit(path, text);
            }
            Read::Filtered => {}
            Read::Skipped(why) => stats.skip(path, why),
        }
    };
    walk_files(target, req.scope, req.threads, req.cancel, stats, one)
}

/// Room in the daemon's parse budget for a file of `size` bytes, held until it is dropped;
/// `None` when there is none (the walk is stopped and the call fails with why). Without a
/// budget, always room.
pub(crate) fn room<'b>(
    req: &'b SearchRequest,
    path: &Path,
    size: u64,
    stats: &Stats,
) -> Option<Option<budget::Permit<'b>>> {
    let Some(budget) = req.limits.budget.as_deref() else {
        return Some(None);
    };
    match budget.take(size, req.cancel) {
        Ok(permit) => Some(Some(permit)),
        Err(Refused::Cancelled) => {
            stats.fail(Error::Cancelled);
            None
        }
        Err(Refused::Busy { waited }) => {
            stats.fail(Error::Busy {
                message: budget::busy_message(budget, path, size, waited),
            });
            None
        }
    }
}

/// Run `one` on every file of the target's language under its root (in parallel); walk
/// errors are counted in `stats`. An explicitly named file is visited whatever the ignore
/// rules say.
pub(crate) fn walk_files<F>(
    target: &Target,
    scope: &Scope,
    threads: usize,
    cancel: Option<&AtomicBool>,
    stats: &Stats,
    one: F,
) -> Result<()>
where
    F: Fn(&Path) + Sync,
{
    if target.is_file {
        one(&target.root);
    } else {
        let lang = target.lang();
        walker(&target.root, threads, scope).run(|| {
            Box::new(|entry| {
                if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) || stats.stopped() {
                    return WalkState::Quit;
                }
                match entry {
                    Ok(entry)
                        if entry.file_type().is_some_and(|t| t.is_file())
                            && lang::from_path(entry.path()) == Some(lang) =>
                    {
                        one(entry.path())
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let path = match &e {
                            ignore::Error::WithPath { path, .. } => path.clone(),
                            _ => target.root.clone(),
                        };
                        stats.skip(&path, format!("walk error: {e}"));
                    }
                }
                WalkState::Continue
            })
        });
    }
    if let Some(failure) = stats.take_failure() {
        return Err(failure);
    }
    if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
        return Err(Error::Cancelled);
    }
    Ok(())
}

/// The captures of a match, bounded.
pub(crate) fn captures(
    m: &NodeMatch<'_, StrDoc<SupportLang>>,
    vars: &[String],
    src: &str,
) -> BTreeMap<String, String> {
    let env = m.get_env();
    let mut out = BTreeMap::new();
    for var in vars {
        let text = if let Some(node) = env.get_match(var) {
            node.text().to_string()
        } else {
            let nodes = env.get_multiple_matches(var);
            match (nodes.first(), nodes.last()) {
                (Some(first), Some(last)) => src[first.range().start..last.range().end].to_string(),
                _ => String::new(),
            }
        };
        out.insert(var.clone(), bounded(&text, CAPTURE_CHARS));
    }
    out
}

/// Heap entry ordered by (path, byte): the heap keeps the largest on top, so popping it
/// keeps the first `max_results` in path order.
struct Ranked(Match);

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (
            &self.0.path,
            self.0.byte,
            self.0.end_line,
            self.0.end_column,
        )
            .cmp(&(
                &other.0.path,
                other.0.byte,
                other.0.end_line,
                other.0.end_column,
            ))
    }
}

/// Search. Every match is counted; the first `max_results` (by path, then position) are
/// returned. Nested matches (a match inside another) are matches too.
pub fn search(req: &SearchRequest) -> Result<SearchResult> {
    search_cached(req, None)
}

/// Search, answering each file whose version the cache knows from the cache (see
/// [`crate::cache`]); every other file is read, parsed and remembered.
pub fn search_cached(req: &SearchRequest, cache: Option<&SearchCache>) -> Result<SearchResult> {
    let target = prepare(req)?;
    search_target_cached(req, &target, cache)
}

/// Search a prepared target.
pub fn search_target(req: &SearchRequest, target: &Target) -> Result<SearchResult> {
    search_target_cached(req, target, None)
}

/// The matches of one file's text, sorted, the first `keep` kept; and how many there were.
///
/// Every match is counted, but only the first `keep` in order are described (line and column,
/// text, captures): a pattern that matches every function of a file (`def $F($$$): $$$`) no
/// longer copies each function's text and counts lines from the file's start for each.
fn matches_in(
    path: &Path,
    text: &str,
    compiled: &CompiledPattern,
    keep: usize,
) -> (usize, Vec<Match>) {
    let tree = lang::parse(text, compiled.lang);
    let root = tree.root();
    let mut all: Vec<_> = root
        .find_all(&compiled.pattern)
        .enumerate()
        .map(|(i, m)| {
            let range = m.range();
            ((range.start, range.end, i), m)
        })
        .collect();
    let found = all.len();
    // A nested match can start where its outer one does: order exactly (by start, then end,
    // then the order found), then describe only what can make the global first `keep`.
    if all.len() > keep {
        all.select_nth_unstable_by_key(keep, |(key, _)| *key);
        all.truncate(keep);
    }
    all.sort_unstable_by_key(|(key, _)| *key);
    let lines = Lines::new(text);
    let mine = all
        .into_iter()
        .map(|((start, end, _), m)| {
            let (line, column) = lines.line_col(text, start);
            let (end_line, end_column) = lines.line_col(text, end);
            Match {
                path: path.to_path_buf(),
                line,
                column,
                end_line,
                end_column,
                text: bounded(&m.text(), MATCH_TEXT_CHARS),
                captures: captures(&m, &compiled.vars, text),
                byte: start,
            }
        })
        .collect();
    (found, mine)
}

/// Where each line of a text starts, for line and column lookups without a scan from the
/// text's start per lookup.
struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        Lines { starts }
    }

    /// Line and column (1-based, characters) of byte `at`.
    fn line_col(&self, text: &str, at: usize) -> (usize, usize) {
        let at = at.min(text.len());
        let line = self.starts.partition_point(|&s| s <= at);
        let start = self.starts[line - 1];
        (line, text[start..at].chars().count() + 1)
    }
}

/// Search a prepared target, with a cache of per-file outcomes when given.
pub fn search_target_cached(
    req: &SearchRequest,
    target: &Target,
    cache: Option<&SearchCache>,
) -> Result<SearchResult> {
    let stats = Stats::default();
    let total = AtomicUsize::new(0);
    let keep = req.max_results;
    let best: Mutex<BinaryHeap<Ranked>> = Mutex::new(BinaryHeap::new());
    let compiled = &target.compiled;
    let cached = AtomicUsize::new(0);
    let merge = |found: usize, mine: Vec<Match>| {
        if found > 0 {
            total.fetch_add(found, Ordering::Relaxed);
            stats.matched.fetch_add(1, Ordering::Relaxed);
            let mut heap = best.lock().unwrap_or_else(|p| p.into_inner());
            for m in mine {
                heap.push(Ranked(m));
                if heap.len() > keep {
                    heap.pop();
                }
            }
        }
    };
    if let Some(cache) = cache {
        let key = crate::cache::pattern_key(
            lang::id(compiled.lang),
            req.pattern,
            compiled.context.as_deref(),
            req.prefilter,
        );
        // Remember at least this many matches per file, so a later call asking for more
        // (up to the tool's cap) is still answered from the cache.
        let remember = keep.max(crate::cache::REMEMBER_MATCHES);
        let filter = if req.prefilter {
            Prefilter::new(&compiled.literals)
        } else {
            None
        };
        walk_files(target, req.scope, req.threads, req.cancel, &stats, |path| {
            stats.files.fetch_add(1, Ordering::Relaxed);
            let (file, meta) = match open_file(req.scope, path) {
                Ok(opened) => opened,
                Err(why) => return stats.skip(path, why),
            };
            let version = crate::cache::Version::of(&meta);
            let hit = cache.get(key, path, &version, keep);
            if hit.is_some() {
                cached.fetch_add(1, Ordering::Relaxed);
            }
            match hit {
                Some(Outcome::Filtered) => {}
                Some(Outcome::Parsed { total, mut matches }) => {
                    stats.parsed.fetch_add(1, Ordering::Relaxed);
                    matches.truncate(keep);
                    merge(total, matches);
                }
                None => {
                    // Held until the tree is dropped, at the end of this arm.
                    let Some(_permit) = room(req, path, meta.len(), &stats) else {
                        return;
                    };
                    match read_opened(file, filter.as_ref(), &req.limits) {
                        Read::Text(text) => {
                            stats.parsed.fetch_add(1, Ordering::Relaxed);
                            let (found, mine) = matches_in(path, &text, compiled, remember);
                            cache.put(
                                key,
                                path,
                                version,
                                Outcome::Parsed {
                                    total: found,
                                    matches: mine.clone(),
                                },
                            );
                            let mut mine = mine;
                            mine.truncate(keep);
                            merge(found, mine);
                        }
                        Read::Filtered => cache.put(key, path, version, Outcome::Filtered),
                        Read::Skipped(why) => stats.skip(path, why),
                    }
                }
            }
        })?;
    } else {
        for_each_file(target, req, &stats, |path, text| {
            let (found, mine) = matches_in(path, &text, compiled, keep);
            merge(found, mine);
        })?;
    }
    if cache.is_some() && req.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
        return Err(Error::Cancelled);
    }
    let mut matches: Vec<Match> = best
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_sorted_vec()
        .into_iter()
        .map(|r| r.0)
        .collect();
    matches.truncate(keep);
    let total = total.into_inner();
    let (skipped_total, skipped) = stats.take_skipped();
    Ok(SearchResult {
        language: lang::id(compiled.lang),
        language_note: target.language_note.clone(),
        pattern_context: compiled.context.clone(),
        truncated: total > matches.len(),
        matches,
        total,
        files_searched: stats.files.load(Ordering::Relaxed),
        files_parsed: stats.parsed.load(Ordering::Relaxed),
        files_cached: cached.load(Ordering::Relaxed),
        files_matched: stats.matched.load(Ordering::Relaxed),
        skipped,
        skipped_total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_swapped_for_a_link_after_the_listing_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let scope = Scope::new(&root, &[], false).unwrap();
        let target = root.join("elsewhere.py");
        std::fs::write(&target, "print(1)\n").unwrap();
        let link = root.join("a.py");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        match read_file(&scope, &link, None) {
            Read::Skipped(why) => assert!(why.contains("symbolic link"), "{why}"),
            Read::Text(t) => panic!("read through the link: {t:?}"),
            Read::Filtered => panic!("filtered"),
        }
        assert!(matches!(read_file(&scope, &target, None), Read::Text(t) if t == "print(1)\n"));
    }

    #[test]
    fn a_directory_swapped_for_a_link_to_outside_after_the_listing_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let scope = Scope::new(&root, &[], false).unwrap();
        std::fs::create_dir(root.join("pkg")).unwrap();
        std::fs::write(root.join("pkg/m.py"), "print(1)\n").unwrap();
        std::fs::write(outside.path().join("m.py"), "print('secret')\n").unwrap();
        // Listed as `pkg/m.py`; then `pkg` becomes a link to a directory outside the scope.
        let listed = root.join("pkg/m.py");
        std::fs::rename(root.join("pkg"), root.join("pkg.old")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("pkg")).unwrap();
        match read_file(&scope, &listed, None) {
            Read::Skipped(why) => assert!(why.contains("not followed"), "{why}"),
            Read::Text(t) => panic!("read outside the scope through a swapped directory: {t:?}"),
            Read::Filtered => panic!("filtered"),
        }
    }

    /// A FIFO named as the path is refused before anything opens it (the old code opened it
    /// and waited for a writer for ever); one that took a listed file's place is skipped, named.
    #[test]
    fn a_fifo_is_refused_when_named_and_skipped_when_found() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let scope = Scope::new(&root, &[], false).unwrap();
        let fifo = root.join("pipe.py");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let req = SearchRequest {
            pattern: "print($A)",
            language: None,
            path: &fifo,
            scope: &scope,
            max_results: 10,
            prefilter: true,
            threads: 1,
            cancel: None,
            limits: Limits::default(),
        };
        match prepare(&req) {
            Err(Error::NotRegular { path, kind }) => {
                assert_eq!((path, kind), (fifo.clone(), "a FIFO (named pipe)"));
            }
            Err(e) => panic!("not refused as a FIFO: {e}"),
            Ok(_) => panic!("a FIFO was taken as a file to search"),
        }
        match read_file(&scope, &fifo, None) {
            Read::Skipped(why) => {
                assert_eq!(why, "a FIFO (named pipe), not a regular file (not opened)");
            }
            Read::Text(t) => panic!("read a FIFO: {t:?}"),
            Read::Filtered => panic!("filtered"),
        }
    }

    fn request<'a>(path: &'a Path, scope: &'a Scope, limits: Limits) -> SearchRequest<'a> {
        SearchRequest {
            pattern: "foo($A)",
            language: Some("javascript"),
            path,
            scope,
            max_results: 10,
            prefilter: true,
            threads: 2,
            cancel: None,
            limits,
        }
    }

    /// A minified file is never parsed: listed as skipped with the rule, refused when named.
    #[test]
    fn a_minified_file_is_skipped_with_the_rule_and_refused_when_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let scope = Scope::new(&root, &[], false).unwrap();
        std::fs::write(root.join("a.min.js"), "foo(1);".repeat(20_000)).unwrap();
        std::fs::write(root.join("b.js"), "foo(2);\n".repeat(20_000)).unwrap();
        let limits = Limits {
            minified_bytes: 64 * 1024,
            line_bytes: 1024,
            ..Limits::default()
        };
        let result = search(&request(&root, &scope, limits.clone())).unwrap();
        assert_eq!(result.total, 20_000, "only b.js is parsed");
        assert_eq!(result.skipped_total, 1);
        assert_eq!(result.skipped[0].path, root.join("a.min.js"));
        assert_eq!(
            result.skipped[0].why,
            "minified: a 136.7 KiB file with a line of 136.7 KiB; files over 64 KiB with lines over 1 KiB are skipped (structural.max_minified_bytes, structural.max_line_bytes)"
        );
        let named = root.join("a.min.js");
        match search(&request(&named, &scope, limits.clone())) {
            Err(Error::Minified { path, why }) => {
                assert_eq!(path, named);
                assert!(why.starts_with("minified: a 136.7 KiB file"), "{why}");
            }
            Err(e) => panic!("refused for another reason: {e}"),
            Ok(r) => panic!("a minified file named as the path was parsed: {r:?}"),
        }
        // b.js is large but of short lines: parsed when named.
        assert_eq!(
            search(&request(&root.join("b.js"), &scope, limits))
                .unwrap()
                .total,
            20_000
        );
    }

    /// With the daemon's parse budget taken by another call, a search waits its bounded
    /// wait and fails `Busy`, naming the cap's key; once room is given back it runs.
    #[test]
    fn a_search_past_the_parse_budget_is_busy_naming_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let scope = Scope::new(&root, &[], false).unwrap();
        std::fs::write(root.join("a.js"), "foo(1);\n").unwrap();
        let budget = std::sync::Arc::new(crate::budget::ParseBudget::new(
            1024,
            std::time::Duration::from_millis(10),
        ));
        let limits = Limits {
            budget: Some(budget.clone()),
            ..Limits::default()
        };
        let held = budget.take(1024, None).unwrap();
        for cache in [None, Some(&SearchCache::new(1 << 20))] {
            match search_cached(&request(&root, &scope, limits.clone()), cache) {
                Err(Error::Busy { message }) => {
                    assert!(
                        message.contains("structural.parse_budget_bytes"),
                        "{message}"
                    );
                    assert!(message.contains("of 1 KiB at once"), "{message}");
                }
                Err(e) => panic!("failed otherwise: {e}"),
                Ok(r) => panic!("parsed past the budget: {r:?}"),
            }
        }
        assert!(matches!(
            crate::rewrite::propose(&request(&root, &scope, limits.clone()), "bar($A)"),
            Err(Error::Busy { .. })
        ));
        drop(held);
        assert_eq!(search(&request(&root, &scope, limits)).unwrap().total, 1);
        assert_eq!(budget.used(), 0, "every permit was given back");
    }
}

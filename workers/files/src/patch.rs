//! `apply_patch`: a unified diff (one or more files, git-style or plain, creations and
//! deletions included) or a `*** Begin Patch` patch (`patch/codex.rs`), applied all or
//! nothing. Every hunk of every file is applied in memory first; a hunk that does not apply
//! is named with its header and context and nothing is written. Then each file is written
//! atomically; should a later write fail, the files already written are put back. With a
//! [`Journal`], every target's original and new bytes are on disk before the first write, so
//! a daemon killed mid-way has the files put back at its next start: all or nothing holds
//! across a crash too.

use crate::edit::load;
use crate::error::{Error, Result};
use crate::journal::Journal;
use crate::journal::{Planned, write_all};
use crate::paths::{Access, Resolved, Scope};
use crate::{ChangeStatus, Changed};
use toolvisor_protocol::results::PatchedFile;

mod codex;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Context(String),
    Remove(String),
    Add(String),
}

/// The old lines of a hunk's (or a section's) `ops`: its context and removed lines, in order.
fn old_lines(ops: &[Op]) -> Vec<&str> {
    ops.iter()
        .filter_map(|o| match o {
            Op::Context(t) | Op::Remove(t) => Some(t.as_str()),
            Op::Add(_) => None,
        })
        .collect()
}

#[derive(Clone, Debug)]
struct Hunk {
    /// 1-based within its file.
    index: usize,
    header: String,
    /// The old start line; `None` for a bare `@@` (located by its context alone).
    old_start: Option<usize>,
    old_count: usize,
    ops: Vec<Op>,
    /// `\ No newline at end of file` after the last old / new line.
    old_no_eol: bool,
    new_no_eol: bool,
}

#[derive(Clone, Debug)]
struct FilePatch {
    /// `None` for `/dev/null`.
    old: Option<String>,
    new: Option<String>,
    hunks: Vec<Hunk>,
}

impl FilePatch {
    fn target(&self) -> &str {
        self.new.as_deref().or(self.old.as_deref()).unwrap_or("")
    }
}

/// What a patch did: each file as `apply_patch` answers it, the same files as the
/// diagnostics-on-write take them, and remarks.
#[derive(Clone, Debug)]
pub struct PatchResult {
    pub files: Vec<PatchedFile>,
    /// Every file changed, for diagnostics-on-write (in the order of `files`).
    pub changed: Vec<Changed>,
    /// Hunks that applied away from their stated line, and similar remarks.
    pub notes: Vec<String>,
}

fn syntax(line: usize, message: impl std::fmt::Display) -> Error {
    Error::PatchSyntax {
        message: format!("patch line {line}: {message}"),
    }
}

fn parse_path(raw: &str) -> Option<String> {
    let raw = raw.split('\t').next().unwrap_or("").trim_end();
    let raw = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .unwrap_or(raw);
    (raw != "/dev/null" && !raw.is_empty()).then(|| raw.to_string())
}

/// Parse `@@ -a[,b] +c[,d] @@ ...` into (old start, old count, new count); `None` for a
/// bare `@@`.
fn parse_header(line: &str) -> Option<Option<(usize, usize, usize)>> {
    let rest = line.strip_prefix("@@")?;
    let trimmed = rest.trim();
    if trimmed.is_empty() || trimmed == "@@" {
        return Some(None);
    }
    let rest = rest.trim_start();
    let rest = rest.strip_prefix('-')?;
    let (old, rest) = rest.split_once(' ')?;
    let rest = rest.trim_start().strip_prefix('+')?;
    let (new, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    if !rest.trim_start().starts_with("@@") {
        return None;
    }
    let range = |r: &str| -> Option<(usize, usize)> {
        match r.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (os, oc) = range(old)?;
    let (_, nc) = range(new)?;
    Some(Some((os, oc, nc)))
}

fn parse(patch: &str) -> Result<Vec<FilePatch>> {
    let mut lines: Vec<&str> = patch
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    if patch.ends_with('\n') {
        // The final newline ends the last line; it does not start an empty one.
        lines.pop();
    }
    let mut files: Vec<FilePatch> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        refuse_unsupported(line, i)?;
        if line.starts_with("--- ") && lines.get(i + 1).is_some_and(|l| l.starts_with("+++ ")) {
            let old = parse_path(&line[4..]);
            let new = parse_path(&lines[i + 1][4..]);
            if old.is_none() && new.is_none() {
                return Err(syntax(i + 1, "both sides are /dev/null"));
            }
            files.push(FilePatch {
                old,
                new,
                hunks: Vec::new(),
            });
            i += 2;
            continue;
        }
        if line.starts_with("@@") {
            let Some(file) = files.last_mut() else {
                return Err(syntax(
                    i + 1,
                    "a hunk comes before any `--- old` / `+++ new` file header",
                ));
            };
            let hunk = parse_hunk(&lines, &mut i, file)?;
            file.hunks.push(hunk);
            continue;
        }
        i += 1;
    }
    if files.is_empty() {
        return Err(Error::PatchSyntax {
            message: "no file header (`--- a/path` then `+++ b/path`) in the patch".into(),
        });
    }
    for f in &files {
        if f.hunks.is_empty() {
            return Err(Error::PatchSyntax {
                message: format!("the patch for {} has no hunks", f.target()),
            });
        }
    }
    strip_git_prefixes(&mut files);
    Ok(files)
}

/// Refuses line `i` (0-based) when it starts what this parser does not take: a misplaced
/// `*** Begin Patch`, a rename or copy, a binary patch.
fn refuse_unsupported(line: &str, i: usize) -> Result<()> {
    if line.trim() == "*** Begin Patch" {
        return Err(syntax(
            i + 1,
            "a `*** Begin Patch` patch must start with that line (only whitespace, or a shell heredoc line such as `apply_patch <<'EOF'`, may come before it)",
        ));
    }
    if line.starts_with("rename from ") || line.starts_with("copy from ") {
        return Err(syntax(
            i + 1,
            "renames and copies are not supported; patch the content, then move the file with bash",
        ));
    }
    if line.starts_with("Binary files ") || line.starts_with("GIT binary patch") {
        return Err(syntax(i + 1, "binary patches are not supported"));
    }
    Ok(())
}

/// The hunk of `file` whose header is at line `*i`; `*i` is left on the line after it.
fn parse_hunk(lines: &[&str], i: &mut usize, file: &FilePatch) -> Result<Hunk> {
    let line = lines[*i];
    let Some(range) = parse_header(line) else {
        return Err(syntax(
            *i + 1,
            format!("{line:?} is not a hunk header (`@@ -l,n +l,n @@`)"),
        ));
    };
    let mut hunk = Hunk {
        index: file.hunks.len() + 1,
        header: line.to_string(),
        old_start: range.map(|r| r.0),
        old_count: range.map(|r| r.1).unwrap_or(0),
        ops: Vec::new(),
        old_no_eol: false,
        new_no_eol: false,
    };
    *i += 1;
    let counted = range.is_some();
    let (old_left, new_left) = hunk_body(lines, i, &mut hunk, file, range)?;
    let i = *i;
    if counted && (old_left > 0 || new_left > 0) {
        // The patch text ended: a trailing empty context line may have been eaten
        // by a final newline.
        let only_blank_missing = old_left == new_left && old_left == 1;
        if only_blank_missing {
            hunk.ops.push(Op::Context(String::new()));
        } else {
            return Err(syntax(
                i,
                format!(
                    "hunk {} of {} ({}) ends early: {old_left} old and {new_left} new line(s) missing",
                    hunk.index,
                    file.target(),
                    hunk.header
                ),
            ));
        }
    }
    if !counted {
        while matches!(hunk.ops.last(), Some(Op::Context(c)) if c.is_empty()) {
            hunk.ops.pop();
        }
        hunk.old_count = hunk.ops.iter().filter(|o| !matches!(o, Op::Add(_))).count();
    }
    if hunk.ops.is_empty() {
        return Err(syntax(i, format!("hunk {} is empty", hunk.index)));
    }
    Ok(hunk)
}

/// The lines of `hunk` from `*i` on, until its header's counts are met (or, for a bare `@@`,
/// the next header); the old and new lines still missing when the patch ended.
fn hunk_body(
    lines: &[&str],
    i: &mut usize,
    hunk: &mut Hunk,
    file: &FilePatch,
    range: Option<(usize, usize, usize)>,
) -> Result<(usize, usize)> {
    let (mut old_left, mut new_left) = range.map(|r| (r.1, r.2)).unwrap_or((0, 0));
    let counted = range.is_some();
    while *i < lines.len() {
        let l = lines[*i];
        if counted && old_left == 0 && new_left == 0 {
            complete_hunk(lines, i, hunk, file)?;
            break;
        }
        if !counted && (l.starts_with("@@") || l.starts_with("--- ") || l.starts_with("diff ")) {
            break;
        }
        let op = match l.as_bytes().first() {
            Some(b' ') => Op::Context(l[1..].to_string()),
            Some(b'-') => Op::Remove(l[1..].to_string()),
            Some(b'+') => Op::Add(l[1..].to_string()),
            Some(b'\\') => {
                mark_no_eol(hunk);
                *i += 1;
                continue;
            }
            // Editors strip the space of an empty context line.
            None => Op::Context(String::new()),
            Some(_) if counted => {
                return Err(syntax(
                    *i + 1,
                    format!(
                        "hunk {} of {} ({}) ends early: expected {old_left} more old and {new_left} more new line(s), got {l:?}; check the line counts in the header",
                        hunk.index,
                        file.target(),
                        hunk.header
                    ),
                ));
            }
            Some(_) => break,
        };
        if counted {
            let (o, n) = match op {
                Op::Context(_) => (1, 1),
                Op::Remove(_) => (1, 0),
                Op::Add(_) => (0, 1),
            };
            if old_left < o || new_left < n {
                return Err(too_many_lines(*i, hunk, file));
            }
            old_left -= o;
            new_left -= n;
        }
        hunk.ops.push(op);
        *i += 1;
    }
    Ok((old_left, new_left))
}

/// After a hunk whose counts are met at line `*i`: takes a no-newline marker, and refuses
/// more body lines (the counts are wrong).
fn complete_hunk(lines: &[&str], i: &mut usize, hunk: &mut Hunk, file: &FilePatch) -> Result<()> {
    // Only a no-newline marker may follow a complete hunk.
    if lines[*i].starts_with('\\') {
        mark_no_eol(hunk);
        *i += 1;
    }
    let next = lines.get(*i).copied().unwrap_or("");
    let header =
        next.starts_with("--- ") && lines.get(*i + 1).is_some_and(|n| n.starts_with("+++ "));
    let more_body = next.starts_with([' ', '+', '-']) && !header;
    if more_body {
        return Err(too_many_lines(*i, hunk, file));
    }
    Ok(())
}

/// A hunk with more lines than its header counts, found at line `i` (0-based).
fn too_many_lines(i: usize, hunk: &Hunk, file: &FilePatch) -> Error {
    syntax(
        i + 1,
        format!(
            "hunk {} of {} ({}) has more lines than its header counts; fix the counts",
            hunk.index,
            file.target(),
            hunk.header
        ),
    )
}

fn mark_no_eol(hunk: &mut Hunk) {
    match hunk.ops.last() {
        Some(Op::Remove(_)) => hunk.old_no_eol = true,
        Some(Op::Add(_)) => hunk.new_no_eol = true,
        Some(Op::Context(_)) => {
            hunk.old_no_eol = true;
            hunk.new_no_eol = true;
        }
        None => {}
    }
}

/// `a/x` / `b/x` (git's default prefixes) become `x` when every side of every file has them.
fn strip_git_prefixes(files: &mut [FilePatch]) {
    let all = files.iter().all(|f| {
        f.old.as_deref().is_none_or(|p| p.starts_with("a/"))
            && f.new.as_deref().is_none_or(|p| p.starts_with("b/"))
    });
    if all {
        for f in files {
            f.old = f.old.take().map(|p| p[2..].to_string());
            f.new = f.new.take().map(|p| p[2..].to_string());
        }
    }
}

/// A file as lines, each with its own line ending (`None` only for a last line without).
struct Lines {
    lines: Vec<(Vec<u8>, Option<&'static [u8]>)>,
    eol: &'static [u8],
}

impl Lines {
    /// What `ops` make of the lines from `at`: context keeps the file's own bytes, added
    /// lines take the file's line ending; counts what was added and removed.
    fn replacement(
        &self,
        ops: &[Op],
        at: usize,
        added: &mut usize,
        removed: &mut usize,
    ) -> Vec<(Vec<u8>, Option<&'static [u8]>)> {
        let mut replacement = Vec::new();
        let mut k = at;
        for op in ops {
            match op {
                Op::Context(_) => {
                    replacement.push(self.lines[k].clone());
                    k += 1;
                }
                Op::Remove(_) => {
                    *removed += 1;
                    k += 1;
                }
                Op::Add(t) => {
                    *added += 1;
                    replacement.push((t.as_bytes().to_vec(), Some(self.eol)));
                }
            }
        }
        replacement
    }

    fn parse(bytes: &[u8]) -> Lines {
        let mut lines = Vec::new();
        let mut crlf = None;
        let mut rest = bytes;
        while !rest.is_empty() {
            match memchr::memchr(b'\n', rest) {
                Some(i) => {
                    let (text, eol): (&[u8], &'static [u8]) = if i > 0 && rest[i - 1] == b'\r' {
                        (&rest[..i - 1], b"\r\n")
                    } else {
                        (&rest[..i], b"\n")
                    };
                    crlf.get_or_insert(eol == b"\r\n");
                    lines.push((text.to_vec(), Some(eol)));
                    rest = &rest[i + 1..];
                }
                None => {
                    lines.push((rest.to_vec(), None));
                    rest = &[];
                }
            }
        }
        Lines {
            lines,
            eol: if crlf == Some(true) { b"\r\n" } else { b"\n" },
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (text, eol) in &self.lines {
            out.extend_from_slice(text);
            if let Some(eol) = eol {
                out.extend_from_slice(eol);
            }
        }
        out
    }

    fn matches_at(&self, at: usize, old: &[&str], loose: bool) -> bool {
        at + old.len() <= self.lines.len()
            && old.iter().zip(&self.lines[at..]).all(|(want, (have, _))| {
                if loose {
                    have.trim_ascii() == want.as_bytes().trim_ascii()
                } else {
                    have.as_slice() == want.as_bytes()
                }
            })
    }
}

struct Applied {
    target: Resolved,
    display: String,
    before: Option<Vec<u8>>,
    after: Option<Vec<u8>>,
    hunks: usize,
    added: usize,
    removed: usize,
    moved_from: Option<String>,
}

/// The paths of the files `patch` would change (as the patch names them: resolve them in the
/// scope), without reading or writing anything; empty when the patch does not parse. The
/// write tools take the diagnostics these files have before the patch is applied.
pub fn targets(patch: &str) -> Vec<String> {
    match codex::body(patch) {
        Ok(Some(body)) => codex::parse(&body)
            .map(|ops| {
                ops.into_iter()
                    .map(|op| match op {
                        codex::FileOp::Add { path, .. }
                        | codex::FileOp::Delete { path }
                        | codex::FileOp::Update { path, .. } => path,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        Ok(None) => parse(patch)
            .map(|files| files.iter().map(|f| f.target().to_string()).collect())
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

/// Apply `patch` to files in `scope`: all hunks of all files, or nothing; recorded in
/// `journal` (when given) before the first write, so a crash mid-way is rolled back.
pub fn apply_patch(scope: &Scope, patch: &str, journal: Option<&Journal>) -> Result<PatchResult> {
    let (applied, notes) = match codex::body(patch)? {
        Some(body) => codex::apply(scope, &codex::parse(&body)?)?,
        None => apply_unified(scope, patch)?,
    };

    // Every hunk applied in memory: journal, write, and put back what was written if a write
    // fails.
    let planned: Vec<Planned<'_>> = applied
        .iter()
        .map(|a| Planned {
            target: &a.target,
            before: a.before.as_deref(),
            after: a.after.as_deref(),
        })
        .collect();
    write_all("apply_patch", scope.root(), &planned, journal)?;
    let (files, changed) = applied
        .into_iter()
        .map(|a| {
            let changed = Changed {
                status: match (&a.before, &a.after) {
                    (None, _) => ChangeStatus::Created,
                    (_, None) => ChangeStatus::Deleted,
                    _ => ChangeStatus::Modified,
                },
                path: a.target.real,
                display: a.display,
            };
            let file = PatchedFile {
                path: changed.display.clone(),
                status: changed.status,
                hunks: a.hunks as u64,
                added: a.added as u64,
                removed: a.removed as u64,
                moved_from: a.moved_from,
            };
            (file, changed)
        })
        .unzip();
    Ok(PatchResult {
        files,
        changed,
        notes,
    })
}

/// A unified diff's hunks applied in memory: every file's new bytes, or the first hunk that
/// does not apply.
fn apply_unified(scope: &Scope, patch: &str) -> Result<(Vec<Applied>, Vec<String>)> {
    let files = parse(patch)?;
    let mut notes = Vec::new();
    let mut applied: Vec<Applied> = Vec::new();
    for fp in &files {
        if let (Some(old), Some(new)) = (&fp.old, &fp.new)
            && old != new
        {
            return Err(Error::PatchSyntax {
                message: format!(
                    "the patch renames {old} to {new}; renames are not supported (patch {old}, then move it with bash)"
                ),
            });
        }
        let resolved = scope.resolve(fp.target(), Access::Write)?;
        let display = resolved.display.clone();
        // A second section for the same file continues from the first one's result.
        let prior = applied.iter().position(|a| a.target.real == resolved.real);
        let current: Option<Vec<u8>> = match prior {
            Some(p) => applied[p].after.clone(),
            None => match load(&resolved) {
                Ok(b) => Some(b),
                Err(Error::NotFound { .. }) => None,
                Err(e) => return Err(e),
            },
        };
        let mut lines = starting_lines(fp, &display, current.as_deref())?;
        let (added, removed) = apply_hunks(&mut lines, fp, &display, &mut notes)?;
        let after = lines.bytes();
        let deleting = fp.new.is_none();
        if deleting && !after.is_empty() {
            return Err(Error::PatchConflict {
                message: format!(
                    "the patch deletes {display}, but {} line(s) would remain after its hunks; nothing was written",
                    lines.lines.len()
                ),
                hint: "the file has more content than the patch removes; read it and make the patch remove all of it".into(),
            });
        }
        match prior {
            Some(p) => {
                let a = &mut applied[p];
                a.after = (!deleting).then_some(after);
                a.hunks += fp.hunks.len();
                a.added += added;
                a.removed += removed;
            }
            None => applied.push(Applied {
                target: resolved,
                display,
                before: current,
                after: (!deleting).then_some(after),
                hunks: fp.hunks.len(),
                added,
                removed,
                moved_from: None,
            }),
        }
    }

    Ok((applied, notes))
}

/// The lines a file's hunks apply to: its `current` bytes, or none for a file the patch
/// creates; a patch that creates an existing file or changes a missing one is refused.
fn starting_lines(fp: &FilePatch, display: &str, current: Option<&[u8]>) -> Result<Lines> {
    Ok(match (&fp.old, current) {
        (None, Some(_)) => {
            return Err(Error::PatchConflict {
                message: format!("the patch creates {display}, which already exists; nothing was written"),
                hint: "patch the existing file (a `--- a/path` header with context), or write it whole".into(),
            });
        }
        (Some(_), None) => {
            return Err(Error::PatchConflict {
                message: format!(
                    "the patch changes {display}, which does not exist; nothing was written"
                ),
                hint: "check the path; a new file's patch starts with `--- /dev/null`".into(),
            });
        }
        (None, None) => Lines {
            lines: Vec::new(),
            eol: b"\n",
        },
        (Some(_), Some(bytes)) => Lines::parse(bytes),
    })
}

/// Applies a file's hunks to `lines` in order, each located from its stated line (an
/// offset is noted); returns (added, removed).
fn apply_hunks(
    lines: &mut Lines,
    fp: &FilePatch,
    display: &str,
    notes: &mut Vec<String>,
) -> Result<(usize, usize)> {
    let (mut added, mut removed) = (0, 0);
    let mut delta: isize = 0;
    let mut floor = 0usize;
    for h in &fp.hunks {
        let old = old_lines(&h.ops);
        let at = locate(lines, h, &old, delta, floor, display)?;
        if let Some(start) = h.old_start {
            let stated = if h.old_count == 0 {
                start
            } else {
                start.saturating_sub(1)
            };
            let expected = (stated as isize + delta).max(0) as usize;
            if at != expected {
                notes.push(format!(
                    "hunk {} of {display} applied at line {} (offset {:+} lines)",
                    h.index,
                    at + 1,
                    at as isize - expected as isize
                ));
            }
        }
        // Build the replacement for lines[at .. at + old.len()].
        let mut replacement = lines.replacement(&h.ops, at, &mut added, &mut removed);
        let end = at + old.len();
        let touches_end = end == lines.lines.len();
        if touches_end && let Some(last) = replacement.last_mut() {
            if h.new_no_eol {
                last.1 = None;
            } else if last.1.is_none() {
                last.1 = Some(lines.eol);
            }
        }
        let new_len = replacement.len();
        lines.lines.splice(at..end, replacement);
        delta += new_len as isize - old.len() as isize;
        floor = at + new_len;
    }
    Ok((added, removed))
}

/// Where hunk `h` applies: at its stated line when it matches there, else the nearest
/// position (not before `floor`, the end of the previous hunk) where its old lines match.
fn locate(
    lines: &Lines,
    h: &Hunk,
    old: &[&str],
    delta: isize,
    floor: usize,
    display: &str,
) -> Result<usize> {
    let n = lines.lines.len();
    let fail = |what: String, hint: String| Error::PatchConflict {
        message: format!(
            "hunk {} of {display} ({}) does not apply, nothing was written: {what}",
            h.index, h.header
        ),
        hint,
    };
    if old.is_empty() {
        // Pure insertion: only its stated line can place it.
        let Some(start) = h.old_start else {
            return Err(fail(
                "it has no context lines and no line number".into(),
                "add context lines around the insertion".into(),
            ));
        };
        let at = (start as isize + delta).max(0) as usize;
        return if at <= n {
            Ok(at.max(floor))
        } else {
            Err(fail(
                format!("it inserts after line {start}, but the file has {n} lines"),
                "read the file and fix the hunk's line numbers".into(),
            ))
        };
    }
    let candidates = |loose: bool| -> Vec<usize> {
        (floor..=n.saturating_sub(old.len()))
            .filter(|&at| lines.matches_at(at, old, loose))
            .collect()
    };
    match h.old_start {
        Some(start) => {
            let stated = if h.old_count == 0 {
                start
            } else {
                start.saturating_sub(1)
            };
            let expected = (stated as isize + delta).max(0) as usize;
            if expected >= floor && lines.matches_at(expected, old, false) {
                return Ok(expected);
            }
            let all = candidates(false);
            if let Some(&best) = all.iter().min_by_key(|&&at| at.abs_diff(expected)) {
                return Ok(best);
            }
            Err(mismatch(lines, h, old, expected, &fail))
        }
        None => {
            let all = candidates(false);
            match all.as_slice() {
                [one] => Ok(*one),
                [] => Err(mismatch(lines, h, old, floor, &fail)),
                many => Err(fail(
                    format!(
                        "its context matches at {} places (lines {})",
                        many.len(),
                        many.iter()
                            .take(10)
                            .map(|a| (a + 1).to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    "give the hunk line numbers (`@@ -l,n +l,n @@`) or more context".into(),
                )),
            }
        }
    }
}

fn mismatch(
    lines: &Lines,
    h: &Hunk,
    old: &[&str],
    expected: usize,
    fail: &dyn Fn(String, String) -> Error,
) -> Error {
    let show = |v: Vec<String>| v.join("\n");
    let want: Vec<String> = old.iter().take(8).map(|l| format!("    {l}")).collect();
    let have: Vec<String> = lines
        .lines
        .iter()
        .skip(expected)
        .take(old.len().min(8))
        .map(|(t, _)| format!("    {}", String::from_utf8_lossy(t)))
        .collect();
    let loose: Vec<usize> = (0..=lines.lines.len().saturating_sub(old.len()))
        .filter(|&at| lines.matches_at(at, old, true))
        .map(|at| at + 1)
        .take(5)
        .collect();
    let hint = if loose.is_empty() {
        "read the file again and regenerate the hunk from its current content".to_string()
    } else {
        format!(
            "the hunk matches at line(s) {} if whitespace at line ends is ignored; regenerate it from the file's exact text",
            loose
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let _ = h;
    fail(
        format!(
            "its context and removed lines were not found (expected at line {}).\nThe hunk expects:\n{}\nThe file has at line {}:\n{}",
            expected + 1,
            show(want),
            expected + 1,
            if have.is_empty() {
                "    (end of file)".to_string()
            } else {
                show(have)
            }
        ),
        hint,
    )
}

#[cfg(test)]
mod tests {

    #[test]
    fn targets_names_the_files_of_either_format_without_touching_them() {
        let unified = "--- a/src/x.py\n+++ b/src/x.py\n@@ -1 +1 @@\n-a\n+b\n";
        assert_eq!(targets(unified), vec!["src/x.py".to_string()]);
        let codex = "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** Add File: b.py\n+z\n*** End Patch\n";
        assert_eq!(targets(codex), vec!["a.py".to_string(), "b.py".to_string()]);
        assert!(targets("not a patch").is_empty());
    }

    use super::*;

    fn setup(files: &[(&str, &str)]) -> (tempfile::TempDir, Scope) {
        let dir = tempfile::tempdir().unwrap();
        for (p, c) in files {
            let path = dir.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, c).unwrap();
        }
        let s = Scope::new(dir.path(), &[], false).unwrap();
        (dir, s)
    }

    fn body(d: &tempfile::TempDir, p: &str) -> String {
        std::fs::read_to_string(d.path().join(p)).unwrap()
    }

    const TEN: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";

    #[test]
    fn applies_hunks_creates_and_deletes() {
        let (d, s) = setup(&[("src/a.txt", TEN), ("gone.txt", "bye\n")]);
        let patch = "diff --git a/src/a.txt b/src/a.txt\nindex 1..2 100644\n--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n@@ -8,3 +8,4 @@\n 8\n 9\n 10\n+11\n--- /dev/null\n+++ b/new/b.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n";
        let r = apply_patch(&s, patch, None).unwrap();
        assert_eq!(
            body(&d, "src/a.txt"),
            "1\ntwo\n3\n4\n5\n6\n7\n8\n9\n10\n11\n"
        );
        assert_eq!(body(&d, "new/b.txt"), "hello\nworld\n");
        assert!(!d.path().join("gone.txt").exists());
        let kinds: Vec<_> = r
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.status))
            .collect();
        assert_eq!(
            kinds,
            [
                ("src/a.txt", ChangeStatus::Modified),
                ("new/b.txt", ChangeStatus::Created),
                ("gone.txt", ChangeStatus::Deleted)
            ]
        );
        assert_eq!((r.files[0].added, r.files[0].removed), (2, 1));
    }

    #[test]
    fn a_failing_hunk_writes_nothing_and_is_named() {
        let (d, s) = setup(&[("a.txt", TEN), ("b.txt", "x\n")]);
        let patch = "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-x\n+y\n--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-1\n+one\n 2\n@@ -5,3 +5,3 @@\n 5\n-six\n+SIX\n 7\n";
        let e = apply_patch(&s, patch, None).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("hunk 2 of a.txt (@@ -5,3 +5,3 @@) does not apply"),
            "{msg}"
        );
        assert!(
            msg.contains("    six") && msg.contains("expected at line 5"),
            "{msg}"
        );
        assert_eq!(
            e.to_tool_error("apply_patch").kind,
            toolvisor_protocol::ErrorKind::Conflict
        );
        assert_eq!(body(&d, "a.txt"), TEN);
        assert_eq!(body(&d, "b.txt"), "x\n");
    }

    #[test]
    fn offsets_crlf_no_eol_and_bare_hunks() {
        let (d, s) = setup(&[("a.txt", "0\n0\n1\n2\n3\n")]);
        let r = apply_patch(
            &s,
            "--- a.txt\n+++ a.txt\n@@ -1,2 +1,2 @@\n 1\n-2\n+II\n",
            None,
        )
        .unwrap();
        assert!(r.notes[0].contains("offset +2"), "{:?}", r.notes);
        assert_eq!(body(&d, "a.txt"), "0\n0\n1\nII\n3\n");

        let (d, s) = setup(&[("w.txt", "a\r\nb\r\nc")]);
        apply_patch(&s, "--- a/w.txt\n+++ b/w.txt\n@@ -2,2 +2,3 @@\n b\n-c\n\\ No newline at end of file\n+C\n+d\n\\ No newline at end of file\n", None).unwrap();
        assert_eq!(body(&d, "w.txt"), "a\r\nb\r\nC\r\nd");

        let (d, s) = setup(&[("f.py", "def f():\n    return 1\n")]);
        apply_patch(
            &s,
            "--- a/f.py\n+++ b/f.py\n@@\n def f():\n-    return 1\n+    return 2\n",
            None,
        )
        .unwrap();
        assert_eq!(body(&d, "f.py"), "def f():\n    return 2\n");
    }

    #[test]
    fn a_journaled_patch_leaves_no_journal_behind() {
        let (d, s) = setup(&[("a.txt", TEN)]);
        let state = tempfile::tempdir().unwrap();
        let journal = Journal::open(&state.path().join("journal")).unwrap();
        let entries = || {
            std::fs::read_dir(state.path().join("journal"))
                .unwrap()
                .count()
        };
        let patch = "--- a.txt\n+++ a.txt\n@@ -1,2 +1,2 @@\n 1\n-2\n+II\n";
        apply_patch(&s, patch, Some(&journal)).unwrap();
        assert!(body(&d, "a.txt").starts_with("1\nII\n3\n"));
        assert_eq!(entries(), 0, "removed once every file is written");
        // A patch that does not apply journals nothing.
        apply_patch(&s, patch, Some(&journal)).unwrap_err();
        assert_eq!(entries(), 0);
    }

    #[test]
    fn bad_patches_say_why() {
        let (_d, s) = setup(&[("a.txt", TEN)]);
        for (patch, says) in [
            ("hello", "no file header"),
            ("say\n*** Begin Patch\n", "must start with that line"),
            (
                "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n",
                "ends early",
            ),
            (
                "--- a/a.txt\n+++ b/a.txt\n@@ -1,1 +1,1 @@\n 1\n 2\n",
                "more lines than",
            ),
            ("--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n", "outside"),
            (
                "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+x\n",
                "already exists",
            ),
        ] {
            let e = apply_patch(&s, patch, None).unwrap_err().to_string();
            assert!(e.contains(says), "{patch:?}: {e}");
        }
    }
}

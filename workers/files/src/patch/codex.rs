//! The `*** Begin Patch` format that models trained for the Codex CLI write: detected from the
//! text (also inside a shell heredoc or after whitespace), parsed into file operations (Add,
//! Delete, Update with an optional Move to, `@@` sections, End of File), and applied in
//! memory. A section's old lines are located with the format's leniency ladder — exact, then
//! ignoring trailing whitespace, then leading and trailing whitespace, then with typographic
//! punctuation normalised to ASCII — and what the patch keeps as context keeps the file's
//! own bytes. Writing is `patch.rs`'s (journaled, all or nothing).

use std::borrow::Cow;

use super::{Applied, Lines, Op, old_lines};
use crate::edit::load;
use crate::error::{Error, Result};
use crate::paths::{Access, Scope};

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

/// A line of the patch with its 1-based number in the text as sent.
type Numbered<'a> = (usize, &'a str);

fn syntax(line: usize, message: impl std::fmt::Display) -> Error {
    Error::PatchSyntax {
        message: format!("patch line {line}: {message}"),
    }
}

/// The lines between `*** Begin Patch` and `*** End Patch` (or the end of the text) when
/// `patch` is in this format: its first line that is not blank is `*** Begin Patch`, or a
/// shell heredoc line (`apply_patch <<'EOF'`, `cat <<EOF | …`) directly followed by it.
/// `None`: not this format (a unified diff, or nothing known).
pub(super) fn body(patch: &str) -> Result<Option<Vec<Numbered<'_>>>> {
    let lines: Vec<Numbered<'_>> = patch
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .collect();
    // Indices of the lines that are not blank.
    let mut solid = (0..lines.len()).filter(|&i| !lines[i].1.trim().is_empty());
    let Some(first) = solid.next() else {
        return Ok(None);
    };
    let (begin, delimiter) = if lines[first].1.trim() == BEGIN {
        (first, None)
    } else {
        let Some(word) = heredoc_delimiter(lines[first].1) else {
            return Ok(None);
        };
        match solid.next() {
            Some(i) if lines[i].1.trim() == BEGIN => (i, Some(word)),
            _ => return Ok(None),
        }
    };
    let after = &lines[begin + 1..];
    let (inner, tail) = match after.iter().position(|(_, l)| l.trim() == END) {
        Some(end) => (&after[..end], &after[end + 1..]),
        None => {
            // No `*** End Patch`: the body runs to the end, less a closing heredoc delimiter.
            let mut end = after.len();
            while end > 0 && after[end - 1].1.trim().is_empty() {
                end -= 1;
            }
            if end > 0 && delimiter.as_deref() == Some(after[end - 1].1.trim()) {
                end -= 1;
            }
            (&after[..end], &after[end..])
        }
    };
    for &(n, l) in tail {
        let l = l.trim();
        if !l.is_empty() && delimiter.as_deref() != Some(l) {
            return Err(syntax(
                n,
                format!(
                    "{l:?} follows `{END}`; nothing may (but blank lines or the heredoc's closing word)"
                ),
            ));
        }
    }
    Ok(Some(inner.to_vec()))
}

/// The closing word of a heredoc opened on `line` (`<<EOF`, `<<'EOF'`, `<<-"PATCH"`).
fn heredoc_delimiter(line: &str) -> Option<String> {
    let (_, after) = line.split_once("<<")?;
    let after = after.strip_prefix('-').unwrap_or(after).trim_start();
    let word: String = after
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// One `@@` section of an Update.
#[derive(Debug, Default)]
pub(super) struct Section {
    /// 1-based within its file.
    index: usize,
    /// The patch line it starts on.
    line: usize,
    /// `@@ <context>` lines, each located after the previous one, before the old lines.
    contexts: Vec<String>,
    ops: Vec<Op>,
    /// `*** End of File`: the old lines are at the end of the file.
    end_of_file: bool,
}

impl Section {
    fn old(&self, drop_trailing_blank: bool) -> Vec<&str> {
        let mut old = old_lines(&self.ops);
        if drop_trailing_blank {
            old.truncate(old.len() - self.trailing_blank_context());
        }
        old
    }

    /// Empty context lines at the end: often only the newline before the next marker.
    fn trailing_blank_context(&self) -> usize {
        self.ops
            .iter()
            .rev()
            .take_while(|o| matches!(o, Op::Context(t) if t.is_empty()))
            .count()
    }

    fn header(&self) -> String {
        match self.contexts.as_slice() {
            [] => "@@".to_string(),
            many => many
                .iter()
                .map(|c| format!("@@ {c}"))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

#[derive(Debug)]
pub(super) enum FileOp {
    Add {
        path: String,
        lines: Vec<String>,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        sections: Vec<Section>,
    },
}

fn path_of(n: usize, marker: &str, rest: &str) -> Result<String> {
    let p = rest.trim();
    if p.is_empty() {
        return Err(syntax(n, format!("`{marker}` names no file")));
    }
    Ok(p.to_string())
}

/// `@@ -3,4 +3,5 @@` (a unified-diff header written out of habit): its numbers are ignored.
fn is_unified_range(context: &str) -> bool {
    let Some(rest) = context.strip_prefix('-') else {
        return false;
    };
    rest.ends_with("@@")
        && rest
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, ',' | ' ' | '+' | '-' | '@'))
}

/// The file operations of a patch's body, in order.
pub(super) fn parse(body: &[Numbered<'_>]) -> Result<Vec<FileOp>> {
    let mut ops = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let (n, raw) = body[i];
        let line = raw.trim();
        i += 1;
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix(ADD) {
            let path = path_of(n, ADD, rest)?;
            let lines = add_lines(body, &mut i);
            ops.push(FileOp::Add { path, lines });
        } else if let Some(rest) = line.strip_prefix(DELETE) {
            ops.push(FileOp::Delete {
                path: path_of(n, DELETE, rest)?,
            });
        } else if let Some(rest) = line.strip_prefix(UPDATE) {
            ops.push(parse_update(body, &mut i, n, rest)?);
        } else {
            return Err(syntax(
                n,
                format!(
                    "{line:?} is not a file operation: expected `{ADD} path`, `{DELETE} path`, `{UPDATE} path` or `{END}`"
                ),
            ));
        }
    }
    if ops.is_empty() {
        return Err(Error::PatchSyntax {
            message: format!("the patch has no file operations between `{BEGIN}` and `{END}`"),
        });
    }
    Ok(ops)
}

/// The lines of an Add from `body[*i]` on, with `*i` moved past them.
fn add_lines(body: &[Numbered<'_>], i: &mut usize) -> Vec<String> {
    let mut lines = Vec::new();
    while *i < body.len() {
        let l = body[*i].1;
        if let Some(text) = l.strip_prefix('+') {
            lines.push(text.to_string());
            *i += 1;
            continue;
        }
        // Blank lines between `+` lines are empty lines of the file (the `+` was
        // dropped); blank lines before a marker or the end separate sections.
        let blanks = body[*i..]
            .iter()
            .take_while(|(_, l)| l.trim().is_empty())
            .count();
        if blanks > 0
            && body
                .get(*i + blanks)
                .is_some_and(|(_, l)| l.starts_with('+'))
        {
            lines.extend(std::iter::repeat_n(String::new(), blanks));
            *i += blanks;
            continue;
        }
        break;
    }
    lines
}

/// The Update whose marker (patch line `n`, naming `rest`) came just before `body[*i]`: its
/// Move to and sections, with `*i` moved past them.
fn parse_update(body: &[Numbered<'_>], i: &mut usize, n: usize, rest: &str) -> Result<FileOp> {
    let path = path_of(n, UPDATE, rest)?;
    let mut move_to = None;
    if let Some(rest) = body.get(*i).and_then(|(_, l)| l.trim().strip_prefix(MOVE)) {
        move_to = Some(path_of(body[*i].0, MOVE, rest)?);
        *i += 1;
    }
    let mut sections = update_sections(body, i, &path)?;
    sections.retain(|s| !s.ops.is_empty() || !s.contexts.is_empty());
    if let Some(s) = sections.iter().find(|s| s.ops.is_empty()) {
        return Err(syntax(
            s.line,
            format!(
                "section {} of {path} ({}) has no lines",
                s.index,
                s.header()
            ),
        ));
    }
    if sections.is_empty() && move_to.is_none() {
        return Err(syntax(
            n,
            format!("the update of {path} has no sections (`@@` then lines)"),
        ));
    }
    Ok(FileOp::Update {
        path,
        move_to,
        sections,
    })
}

/// The `@@` sections of the update of `path` from `body[*i]` to the next file's marker, with
/// `*i` moved to that marker.
fn update_sections(body: &[Numbered<'_>], i: &mut usize, path: &str) -> Result<Vec<Section>> {
    let mut sections: Vec<Section> = Vec::new();
    while *i < body.len() {
        let (n, l) = body[*i];
        let t = l.trim();
        if t == END_OF_FILE {
            match sections.last_mut() {
                Some(s) if !s.ops.is_empty() => s.end_of_file = true,
                _ => {
                    return Err(syntax(
                        n,
                        format!("`{END_OF_FILE}` ends a section of {path} that has no lines"),
                    ));
                }
            }
            *i += 1;
            continue;
        }
        // The next file's marker ends the update; a context line that merely starts
        // with `***` after its space (Markdown, a comment) does not.
        if l.starts_with("***")
            || [ADD, DELETE, UPDATE, MOVE, END]
                .iter()
                .any(|m| t.starts_with(m))
        {
            break;
        }
        if let Some(context) = l.strip_prefix("@@") {
            open_section(&mut sections, n, context);
            *i += 1;
            continue;
        }
        if l.is_empty() && sections.last().is_none_or(|s| s.ops.is_empty()) {
            // Blank lines before a section's first line separate sections.
            *i += 1;
            continue;
        }
        let op = section_op(n, l, path)?;
        if sections.last().is_none_or(|s| s.end_of_file) {
            sections.push(Section {
                index: sections.len() + 1,
                line: n,
                ..Section::default()
            });
        }
        sections.last_mut().expect("pushed above").ops.push(op);
        *i += 1;
    }
    Ok(sections)
}

/// An `@@ <context>` line (patch line `n`): a new section, or a narrower context of the last
/// one when it has no lines yet.
fn open_section(sections: &mut Vec<Section>, n: usize, context: &str) {
    let context = context.trim();
    let context = if is_unified_range(context) {
        ""
    } else {
        context
    };
    // `@@ class A` then `@@ def f`: the second narrows the first.
    let narrows = sections
        .last()
        .is_some_and(|s| s.ops.is_empty() && !s.contexts.is_empty());
    if !narrows {
        sections.push(Section {
            index: sections.len() + 1,
            line: n,
            ..Section::default()
        });
    }
    if !context.is_empty() {
        let s = sections.last_mut().expect("pushed above");
        s.contexts.push(context.to_string());
    }
}

/// A section's line `l` (patch line `n`) in the update of `path`: context, removed or added.
fn section_op(n: usize, l: &str, path: &str) -> Result<Op> {
    Ok(match l.as_bytes().first() {
        None => Op::Context(String::new()),
        Some(b' ') => Op::Context(l[1..].to_string()),
        Some(b'-') => Op::Remove(l[1..].to_string()),
        Some(b'+') => Op::Add(l[1..].to_string()),
        Some(_) => {
            return Err(syntax(
                n,
                format!(
                    "{l:?} in the update of {path} starts with none of ' ' (context), '-' (removed), '+' (added), `@@` (a section) or `***` (the next file)"
                ),
            ));
        }
    })
}

/// How loosely old lines matched the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Exact,
    TrailingSpace,
    Space,
    Punctuation,
}

impl Level {
    const LADDER: [Level; 4] = [
        Level::Exact,
        Level::TrailingSpace,
        Level::Space,
        Level::Punctuation,
    ];

    fn eq(self, have: &str, want: &str) -> bool {
        match self {
            Level::Exact => have == want,
            Level::TrailingSpace => have.trim_end() == want.trim_end(),
            Level::Space => have.trim() == want.trim(),
            Level::Punctuation => have
                .trim()
                .chars()
                .map(ascii_punctuation)
                .eq(want.trim().chars().map(ascii_punctuation)),
        }
    }

    fn says(self) -> &'static str {
        match self {
            Level::Exact => "exactly",
            Level::TrailingSpace => "ignoring whitespace at line ends",
            Level::Space => "ignoring leading and trailing whitespace",
            Level::Punctuation => {
                "ignoring leading and trailing whitespace, with typographic dashes, quotes and spaces read as ASCII"
            }
        }
    }
}

/// Typographic dashes, quotes and spaces as their ASCII forms.
fn ascii_punctuation(c: char) -> char {
    match c {
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{2018}'..='\u{201B}' => '\'',
        '\u{201C}'..='\u{201F}' => '"',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        c => c,
    }
}

/// The first position at or after `from` where `want` matches `have`, trying each level of
/// the ladder over the whole range before the next; with `end_of_file`, the position that
/// ends the file is tried first at each level.
fn seek(
    have: &[Cow<'_, str>],
    want: &[&str],
    from: usize,
    end_of_file: bool,
) -> Option<(usize, Level)> {
    if want.len() > have.len() {
        return None;
    }
    let last = have.len() - want.len();
    let at = |i: usize, level: Level| want.iter().zip(&have[i..]).all(|(w, h)| level.eq(h, w));
    for level in Level::LADDER {
        if end_of_file && last >= from && at(last, level) {
            return Some((last, level));
        }
        if let Some(i) = (from..=last).find(|&i| at(i, level)) {
            return Some((i, level));
        }
    }
    None
}

/// Where the file comes closest to `want` at or after `from` (most lines equal but for
/// surrounding whitespace), for the error; `from` when nothing is close.
fn closest(have: &[Cow<'_, str>], want: &[&str], from: usize) -> usize {
    const BUDGET: usize = 20_000_000;
    let end = have.len().saturating_sub(want.len().min(have.len()));
    if from > end || (end - from + 1).saturating_mul(want.len()) > BUDGET {
        return from;
    }
    let score = |i: usize| {
        want.iter()
            .zip(&have[i..])
            .filter(|(w, h)| Level::Space.eq(h, w))
            .count()
    };
    let (best, hits) = (from..=end)
        .map(|i| (i, score(i)))
        .fold((from, 0), |b, c| if c.1 > b.1 { c } else { b });
    if hits == 0 { from } else { best }
}

fn indent(lines: impl Iterator<Item = impl AsRef<str>>, total: usize) -> String {
    const SHOW: usize = 8;
    let mut out: Vec<String> = lines
        .take(SHOW)
        .map(|l| format!("    {}", l.as_ref()))
        .collect();
    if out.is_empty() {
        out.push("    (end of file)".to_string());
    }
    if total > SHOW {
        out.push(format!("    … ({} more line(s))", total - SHOW));
    }
    out.join("\n")
}

/// Apply an Update's sections to `lines` in place; returns (added, removed).
fn apply_sections(
    lines: &mut Lines,
    sections: &[Section],
    display: &str,
    notes: &mut Vec<String>,
) -> Result<(usize, usize)> {
    let (mut added, mut removed) = (0, 0);
    let mut from = 0usize;
    for s in sections {
        let (at, drop_blank) = {
            let have: Vec<Cow<'_, str>> = lines
                .lines
                .iter()
                .map(|(t, _)| String::from_utf8_lossy(t))
                .collect();
            from = seek_contexts(&have, s, from, display)?;
            locate(&have, s, from, display, notes)?
        };
        from = splice_section(lines, s, at, drop_blank, &mut added, &mut removed);
    }
    Ok((added, removed))
}

/// Section `s` of `display` does not apply: `what` went wrong, `hint` says what to do.
fn section_conflict(s: &Section, display: &str, what: String, hint: String) -> Error {
    Error::PatchConflict {
        message: format!(
            "section {} of {display} ({}, patch line {}) does not apply, nothing was written: {what}",
            s.index,
            s.header(),
            s.line
        ),
        hint,
    }
}

/// Finds the section's `@@` context lines in order at or after `from`; the line after the
/// last one found.
fn seek_contexts(
    have: &[Cow<'_, str>],
    s: &Section,
    mut from: usize,
    display: &str,
) -> Result<usize> {
    for context in &s.contexts {
        match seek(have, &[context.as_str()], from, false) {
            Some((at, _)) => from = at + 1,
            None => {
                let earlier = seek(have, &[context.as_str()], 0, false).map(|(at, _)| at + 1);
                return Err(section_conflict(
                    s,
                    display,
                    format!(
                        "its context line {context:?} is not in the file{}",
                        if from > 0 {
                            format!(" after line {from}")
                        } else {
                            String::new()
                        }
                    ),
                    match earlier {
                        Some(at) => format!(
                            "it is at line {at}, before the previous section's end; put the sections in file order"
                        ),
                        None => "read the file again and take the `@@` line from its current text (a function or class line), or use a bare `@@`".into(),
                    },
                ));
            }
        }
    }
    Ok(from)
}

/// Where the section's old lines are at or after `from` (a looser match is noted), and
/// whether they matched only without the section's trailing blank context lines.
fn locate(
    have: &[Cow<'_, str>],
    s: &Section,
    from: usize,
    display: &str,
    notes: &mut Vec<String>,
) -> Result<(usize, bool)> {
    let mut drop_blank = false;
    let mut old = s.old(false);
    let place = if old.is_empty() {
        // Pure insertion: after the context line, else at the end of the file.
        Some(if s.contexts.is_empty() {
            have.len()
        } else {
            from
        })
    } else {
        let mut found = seek(have, &old, from, s.end_of_file);
        if found.is_none() && s.trailing_blank_context() > 0 {
            drop_blank = true;
            old = s.old(true);
            found = if old.is_empty() {
                None
            } else {
                seek(have, &old, from, s.end_of_file)
            };
        }
        if let Some((at, level)) = found
            && level != Level::Exact
        {
            notes.push(format!(
                "section {} of {display} matched at line {} {}",
                s.index,
                at + 1,
                level.says()
            ));
        }
        found.map(|(at, _)| at)
    };
    let Some(at) = place else {
        let old = s.old(false);
        let near = closest(have, &old, from);
        let earlier = seek(have, &old, 0, false).map(|(at, _)| at + 1);
        return Err(section_conflict(
            s,
            display,
            format!(
                "its context and removed lines were not found{}.\nThe section expects:\n{}\nThe file has at line {}:\n{}",
                if from > 0 {
                    format!(" after line {from}")
                } else {
                    String::new()
                },
                indent(old.iter(), old.len()),
                near + 1,
                indent(have.iter().skip(near).take(old.len()), old.len()),
            ),
            match earlier {
                Some(at) => format!(
                    "they are at line {at}, before the previous section's end or `@@` context; put the sections in file order"
                ),
                None => {
                    "read the file again and regenerate the section from its current text".into()
                }
            },
        ));
    };
    Ok((at, drop_blank))
}

/// Replaces the old lines section `s` spans from line `at` with its new ones, counting them
/// in `added` and `removed`; the line after the replacement.
fn splice_section(
    lines: &mut Lines,
    s: &Section,
    at: usize,
    drop_blank: bool,
    added: &mut usize,
    removed: &mut usize,
) -> usize {
    // Build the replacement of lines[at .. at + old.len()]: context keeps the file's bytes.
    let ops = if drop_blank {
        &s.ops[..s.ops.len() - s.trailing_blank_context()]
    } else {
        &s.ops[..]
    };
    let mut replacement = lines.replacement(ops, at, added, removed);
    // The section replaces its old lines.
    let end = at + old_lines(ops).len();
    // The file's last line keeps whether it had a line ending.
    if end == lines.lines.len() {
        let final_newline = lines.lines.last().is_none_or(|l| l.1.is_some());
        match replacement.last_mut() {
            Some(last) if final_newline => last.1 = Some(last.1.unwrap_or(lines.eol)),
            Some(last) => last.1 = None,
            None if at > 0 && !final_newline => lines.lines[at - 1].1 = None,
            None => {}
        }
    }
    let new_len = replacement.len();
    lines.lines.splice(at..end, replacement);
    // A former last line without a line ending that is no longer last gets one.
    let last = lines.lines.len().saturating_sub(1);
    let eol = lines.eol;
    for l in &mut lines.lines[at.saturating_sub(1)..(at + new_len).min(last)] {
        l.1.get_or_insert(eol);
    }
    at + new_len
}

/// Apply `ops` in memory, in order (a later operation sees what an earlier one did to the
/// same file): every touched file's original and new bytes, and notes.
pub(super) fn apply(scope: &Scope, ops: &[FileOp]) -> Result<(Vec<Applied>, Vec<String>)> {
    let mut files: Vec<Applied> = Vec::new();
    let mut notes = Vec::new();
    for op in ops {
        match op {
            FileOp::Add { path, lines } => {
                let i = slot(scope, &mut files, path)?;
                let a = &mut files[i];
                if a.after.is_some() {
                    return Err(Error::PatchConflict {
                        message: format!(
                            "the patch adds {}, which already exists; nothing was written",
                            a.display
                        ),
                        hint: format!(
                            "change it with `{UPDATE} {path}` (sections with context), or delete it first in the same patch (`{DELETE} {path}`)"
                        ),
                    });
                }
                let mut bytes = Vec::new();
                for l in lines {
                    bytes.extend_from_slice(l.as_bytes());
                    bytes.push(b'\n');
                }
                a.after = Some(bytes);
                a.hunks += 1;
                a.added += lines.len();
            }
            FileOp::Delete { path } => {
                let i = slot(scope, &mut files, path)?;
                let a = &mut files[i];
                let Some(current) = a.after.take() else {
                    return Err(Error::PatchConflict {
                        message: format!(
                            "the patch deletes {}, which does not exist; nothing was written",
                            a.display
                        ),
                        hint: "check the path (relative to the workdir)".into(),
                    });
                };
                a.hunks += 1;
                a.removed += Lines::parse(&current).lines.len();
            }
            FileOp::Update {
                path,
                move_to,
                sections,
            } => apply_update(
                scope,
                &mut files,
                &mut notes,
                path,
                move_to.as_deref(),
                sections,
            )?,
        }
    }
    let (changed, same): (Vec<Applied>, Vec<Applied>) =
        files.into_iter().partition(|a| a.before != a.after);
    for a in same {
        notes.push(format!("{} is unchanged by the patch", a.display));
    }
    Ok((changed, notes))
}

/// The index in `files` of `path`, loaded from disk the first time it is named.
fn slot(scope: &Scope, files: &mut Vec<Applied>, path: &str) -> Result<usize> {
    let target = scope.resolve(path, Access::Write)?;
    if let Some(i) = files.iter().position(|a| a.target.real == target.real) {
        return Ok(i);
    }
    let before = match load(&target) {
        Ok(b) => Some(b),
        Err(Error::NotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    files.push(Applied {
        display: target.display.clone(),
        target,
        after: before.clone(),
        before,
        hunks: 0,
        added: 0,
        removed: 0,
        moved_from: None,
    });
    Ok(files.len() - 1)
}

/// Applies an Update's sections to `path` as `files` has it now, then moves the result to
/// `move_to` when it names another file (which must not exist).
fn apply_update(
    scope: &Scope,
    files: &mut Vec<Applied>,
    notes: &mut Vec<String>,
    path: &str,
    move_to: Option<&str>,
    sections: &[Section],
) -> Result<()> {
    let i = slot(scope, files, path)?;
    let display = files[i].display.clone();
    let Some(current) = files[i].after.as_deref() else {
        return Err(Error::PatchConflict {
            message: format!(
                "the patch updates {display}, which does not exist; nothing was written"
            ),
            hint: format!(
                "check the path; a new file is `{ADD} {path}` with every line starting with '+'"
            ),
        });
    };
    let mut lines = Lines::parse(current);
    let (added, removed) = apply_sections(&mut lines, sections, &display, notes)?;
    let after = lines.bytes();
    let dest = match move_to {
        Some(to) => {
            let j = slot(scope, files, to)?;
            (j != i).then_some(j)
        }
        None => None,
    };
    let k = match dest {
        Some(j) => {
            if files[j].after.is_some() {
                return Err(Error::PatchConflict {
                    message: format!(
                        "the patch moves {display} to {}, which already exists; nothing was written",
                        files[j].display
                    ),
                    hint: format!(
                        "delete it first in the same patch (`{DELETE} {}`), or move to another name",
                        move_to.unwrap_or_default()
                    ),
                });
            }
            files[i].after = None;
            files[j].moved_from = Some(display.clone());
            notes.push(format!("moved {display} to {}", files[j].display));
            j
        }
        None => i,
    };
    let a = &mut files[k];
    a.after = Some(after);
    a.hunks += sections.len();
    a.added += added;
    a.removed += removed;
    Ok(())
}

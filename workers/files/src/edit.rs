//! `edit`: replace an exact text in a file. Zero matches or several (without `replace_all`)
//! is an error that says how many and where; the write is atomic; the result carries a
//! unified diff of the change.

use std::io::Read as _;
use std::time::Duration;

use memchr::memmem;

use crate::error::{Error, Result};
use crate::paths::{Access, Resolved, Scope};
use crate::text;
use crate::write::write_atomic;
use crate::{ChangeStatus, Changed};

/// Files larger than this are not edited in memory.
pub const MAX_EDIT_BYTES: u64 = 256 * 1024 * 1024;
const MAX_LISTED: usize = 20;

#[derive(Clone, Debug)]
pub struct EditResult {
    pub changed: Changed,
    pub replacements: usize,
    /// 1-based lines (in the old file) where each replaced text started.
    pub lines: Vec<usize>,
    /// A unified diff of the change, 3 lines of context.
    pub diff: String,
    pub notes: Vec<String>,
}

pub fn edit(
    scope: &Scope,
    path: &str,
    old_text: &str,
    new_text: &str,
    replace_all: bool,
) -> Result<EditResult> {
    if old_text.is_empty() {
        return Err(Error::bad(
            "old_text",
            "is empty; use write to create or replace a whole file",
        ));
    }
    if old_text == new_text {
        return Err(Error::bad(
            "new_text",
            "is identical to old_text; nothing would change",
        ));
    }
    let resolved = scope.resolve(path, Access::Write)?;
    let display = resolved.display.clone();
    let bytes = load(&resolved)?;
    let mut notes = Vec::new();

    let mut old = old_text.as_bytes().to_vec();
    let mut new = new_text.as_bytes().to_vec();
    let mut found = positions(&bytes, &old);
    if found.is_empty() && old.contains(&b'\n') && memmem::find(&bytes, b"\r\n").is_some() {
        // The file uses CRLF and the caller wrote LF: match and write in the file's style.
        let (o, n) = (to_crlf(old_text), to_crlf(new_text));
        let again = positions(&bytes, o.as_bytes());
        if !again.is_empty() {
            found = again;
            old = o.into_bytes();
            new = n.into_bytes();
            notes.push("matched with CRLF line endings, as the file uses them".into());
        }
    }
    if found.is_empty() {
        return Err(no_match(&bytes, old_text, &display));
    }
    let lines: Vec<usize> = line_numbers(&bytes, &found);
    if found.len() > 1 && !replace_all {
        let shown: Vec<String> = found
            .iter()
            .zip(&lines)
            .take(MAX_LISTED)
            .map(|(&at, line)| format!("{line}:{}", column(&bytes, at)))
            .collect();
        let more = if lines.len() > MAX_LISTED {
            format!(" and {} more", lines.len() - MAX_LISTED)
        } else {
            String::new()
        };
        return Err(Error::Ambiguous {
            message: format!(
                "old_text matches {} times in {display}, at (line:column) {}{more}; nothing was changed",
                found.len(),
                shown.join(", ")
            ),
        });
    }
    let mut out = Vec::with_capacity(bytes.len() + found.len() * new.len());
    let mut last = 0;
    for &at in &found {
        out.extend_from_slice(&bytes[last..at]);
        out.extend_from_slice(&new);
        last = at + old.len();
    }
    out.extend_from_slice(&bytes[last..]);
    write_atomic(&resolved, &out)?;
    let diff = unified(&bytes, &out, &display);
    Ok(EditResult {
        changed: Changed {
            path: resolved.real.clone(),
            display,
            status: ChangeStatus::Modified,
        },
        replacements: found.len(),
        lines,
        diff,
        notes,
    })
}

/// Read a file for editing: it must exist, be text, and fit in memory. One open (beneath
/// the root) serves the size check and the read.
pub(crate) fn load(target: &Resolved) -> Result<Vec<u8>> {
    let display = target.display.as_str();
    let mut file = target.open()?;
    let meta = file.metadata().map_err(|e| target.error("stat", e))?;
    if meta.is_dir() {
        return Err(Error::IsDir {
            path: display.to_string(),
        });
    }
    if meta.len() > MAX_EDIT_BYTES {
        return Err(Error::TooLarge {
            message: format!(
                "{display} has {} bytes, above the {MAX_EDIT_BYTES} edited in memory",
                meta.len()
            ),
            hint: "edit it with bash (sed, a script) instead".into(),
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes)
        .map_err(|e| target.error("read", e))?;
    if let Some(why) = text::binary_reason(&bytes) {
        return Err(Error::Binary {
            path: display.to_string(),
            why,
        });
    }
    Ok(bytes)
}

fn to_crlf(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// Start offsets of the non-overlapping occurrences of `needle`.
fn positions(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let finder = memmem::Finder::new(needle);
    let mut from = 0;
    while let Some(i) = finder.find(&hay[from..]) {
        out.push(from + i);
        from += i + needle.len();
    }
    out
}

/// 1-based column, in characters, of byte offset `at`.
fn column(bytes: &[u8], at: usize) -> usize {
    let start = memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |i| i + 1);
    text::decode_lossy(&bytes[start..at]).0.chars().count() + 1
}

fn line_numbers(bytes: &[u8], offsets: &[usize]) -> Vec<usize> {
    let mut line = 1;
    let mut last = 0;
    offsets
        .iter()
        .map(|&at| {
            line += memchr::memchr_iter(b'\n', &bytes[last..at]).count();
            last = at;
            line
        })
        .collect()
}

/// The error for zero matches, with the nearest thing that does match when there is one.
fn no_match(bytes: &[u8], old_text: &str, display: &str) -> Error {
    let (content, _) = text::decode_lossy(bytes);
    let file_lines: Vec<&str> = content.lines().collect();
    let want: Vec<&str> = old_text.lines().map(str::trim).collect();
    let mut hint = String::from(
        "read the file again and copy old_text exactly, whitespace and line breaks included",
    );
    if !want.is_empty() && want.len() <= file_lines.len() {
        let loose: Vec<usize> = (0..=file_lines.len() - want.len())
            .filter(|&i| {
                want.iter()
                    .zip(&file_lines[i..])
                    .all(|(w, l)| l.trim() == *w)
            })
            .map(|i| i + 1)
            .take(MAX_LISTED)
            .collect();
        if !loose.is_empty() {
            hint = format!(
                "old_text matches at line(s) {} if leading and trailing whitespace is ignored: copy the exact indentation from read",
                join(&loose)
            );
        } else if let Some(first) = want.iter().find(|w| !w.is_empty()) {
            let hits: Vec<usize> = file_lines
                .iter()
                .enumerate()
                .filter(|(_, l)| l.contains(first))
                .map(|(i, _)| i + 1)
                .take(MAX_LISTED)
                .collect();
            if !hits.is_empty() {
                hint = format!(
                    "the first line of old_text appears at line(s) {}, but the following lines differ; read those lines again and copy them exactly",
                    join(&hits)
                );
            }
        }
    }
    Error::NoMatch {
        message: format!("old_text was not found in {display}; nothing was changed"),
        hint,
    }
}

fn join(v: &[usize]) -> String {
    v.iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A unified diff between two versions of `display`.
pub(crate) fn unified(old: &[u8], new: &[u8], display: &str) -> String {
    let (old, _) = text::decode_lossy(old);
    let (new, _) = text::decode_lossy(new);
    similar::TextDiff::configure()
        .timeout(Duration::from_secs(2))
        .diff_lines(old.as_ref(), new.as_ref())
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{display}"), &format!("b/{display}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(content: &str) -> (tempfile::TempDir, Scope) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.rs"), content).unwrap();
        let s = Scope::new(dir.path(), &[], false).unwrap();
        (dir, s)
    }

    fn body(d: &tempfile::TempDir) -> String {
        std::fs::read_to_string(d.path().join("f.rs")).unwrap()
    }

    #[test]
    fn replaces_one_exact_match_with_a_diff() {
        let (d, s) = setup("fn a() {\n    1\n}\nfn b() {}\n");
        let r = edit(&s, "f.rs", "    1\n", "    2\n", false).unwrap();
        assert_eq!((r.replacements, r.lines.as_slice()), (1, &[2][..]));
        assert_eq!(body(&d), "fn a() {\n    2\n}\nfn b() {}\n");
        assert!(r.diff.contains("-    1\n+    2\n"), "{}", r.diff);
        assert!(r.diff.starts_with("--- a/f.rs\n+++ b/f.rs\n"));
    }

    #[test]
    fn ambiguity_names_count_and_lines_and_changes_nothing() {
        let (d, s) = setup("x = 1\ny = 2\nx = 1\n");
        let e = edit(&s, "f.rs", "x = 1", "x = 3", false).unwrap_err();
        assert!(
            e.to_string()
                .contains("matches 2 times in f.rs, at (line:column) 1:1, 3:1"),
            "{e}"
        );
        assert_eq!(body(&d), "x = 1\ny = 2\nx = 1\n");
        let r = edit(&s, "f.rs", "x = 1", "x = 3", true).unwrap();
        assert_eq!(r.replacements, 2);
        assert_eq!(body(&d), "x = 3\ny = 2\nx = 3\n");
    }

    #[test]
    fn no_match_points_at_the_near_miss() {
        let (_d, s) = setup("fn a() {\n\tdeep();\n}\n");
        let e = edit(&s, "f.rs", "    deep();\n}", "x", false).unwrap_err();
        let t = e.to_tool_error("edit");
        assert_eq!(t.kind, toolvisor_protocol::ErrorKind::NotFound);
        assert!(t.hint.contains("line(s) 2 if leading"), "{}", t.hint);
        assert!(matches!(
            edit(&s, "f.rs", "a", "a", false),
            Err(Error::BadArgs { .. })
        ));
    }

    #[test]
    fn crlf_files_are_matched_and_kept_crlf() {
        let (d, s) = setup("a\r\nb\r\nc\r\n");
        let r = edit(&s, "f.rs", "a\nb\n", "a\nB\n", false).unwrap();
        assert_eq!(r.notes.len(), 1);
        assert_eq!(body(&d), "a\r\nB\r\nc\r\n");
    }
}

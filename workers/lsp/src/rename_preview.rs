//! `lsp_rename {dry_run: true}`: the whole edit listed per file with line previews, nothing
//! written, and the preview remembered per run, so that the real rename of the same symbol
//! afterwards writes exactly what was shown or is refused (`conflict`) when the edit it
//! computes now differs (a file changed in between).

use std::collections::VecDeque;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{LspChangedLine, LspPreviewedFile};
use toolvisor_protocol::tools::LspRenameArgs;

use crate::answers::show_path;
use crate::change::FileChange;
use crate::lock;

/// Runs whose last preview is remembered.
const REMEMBERED_RUNS: usize = 256;
/// Changed lines shown in a preview, over all files.
pub const PREVIEW_LINES_MAX: usize = 200;
/// Characters of one shown line.
const LINE_CHARS_MAX: usize = 200;

/// Which rename a preview was for.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Asked {
    file: String,
    line: u64,
    symbol: String,
    new_name: String,
    occurrence: u64,
}

impl Asked {
    fn of(a: &LspRenameArgs) -> Asked {
        Asked {
            file: a.file.clone(),
            line: a.line,
            symbol: a.symbol.clone(),
            new_name: a.new_name.clone(),
            occurrence: a.occurrence.unwrap_or(1),
        }
    }
}

/// What a preview showed: every file's real path and a digest of its new text.
#[derive(Clone, Debug)]
struct Shown {
    asked: Asked,
    files: Vec<(PathBuf, u64)>,
    edits: usize,
}

fn digest(changes: &[FileChange]) -> Vec<(PathBuf, u64)> {
    changes
        .iter()
        .map(|c| {
            let mut h = DefaultHasher::new();
            c.new.hash(&mut h);
            (c.path.clone(), h.finish())
        })
        .collect()
}

/// The last preview of each run (bounded by [`REMEMBERED_RUNS`]).
#[derive(Debug, Default)]
pub struct Previews {
    runs: Mutex<VecDeque<(String, Shown)>>,
}

impl Previews {
    pub fn remember(&self, run: &str, args: &LspRenameArgs, changes: &[FileChange]) {
        let shown = Shown {
            asked: Asked::of(args),
            files: digest(changes),
            edits: changes.iter().map(|c| c.edits).sum(),
        };
        let mut runs = lock(&self.runs);
        runs.retain(|(r, _)| r != run);
        runs.push_back((run.to_string(), shown));
        while runs.len() > REMEMBERED_RUNS {
            runs.pop_front();
        }
    }

    /// The previewed edit's (edits, files) when `run`'s last preview was of this rename.
    pub fn previewed(&self, run: &str, args: &LspRenameArgs) -> Option<(usize, usize)> {
        let asked = Asked::of(args);
        lock(&self.runs)
            .iter()
            .find(|(r, s)| r == run && s.asked == asked)
            .map(|(_, s)| (s.edits, s.files.len()))
    }

    /// Before a real rename writes: when `run` previewed this rename, the edit computed now
    /// must be the one shown; else `conflict`, and nothing is written. A rename that was not
    /// previewed passes.
    pub fn check(
        &self,
        run: &str,
        args: &LspRenameArgs,
        changes: &[FileChange],
        workdir: &Path,
    ) -> Result<(), ToolError> {
        let asked = Asked::of(args);
        let runs = lock(&self.runs);
        let Some((_, shown)) = runs.iter().find(|(r, s)| r == run && s.asked == asked) else {
            return Ok(());
        };
        let now = digest(changes);
        if now == shown.files {
            return Ok(());
        }
        let changed: Vec<String> = now
            .iter()
            .filter(|f| !shown.files.contains(f))
            .map(|(p, _)| show_path(p, workdir))
            .chain(
                shown
                    .files
                    .iter()
                    .filter(|f| !now.iter().any(|(p, _)| *p == f.0))
                    .map(|(p, _)| show_path(p, workdir)),
            )
            .collect();
        Err(ToolError::new(
            ErrorKind::Conflict,
            format!(
                "the rename of `{}` to `{}` now differs from its preview ({}): nothing was written",
                args.symbol,
                args.new_name,
                match changed.is_empty() {
                    true => "the files it touches changed".to_string(),
                    false => format!("differs in {}", changed.join(", ")),
                }
            ),
            "files changed since the preview; preview again (dry_run: true) to see the edit as it is now",
        ))
    }

    /// The preview was used (or is void): the next real rename of it is checked no more.
    pub fn forget(&self, run: &str) {
        lock(&self.runs).retain(|(r, _)| r != run);
    }
}

/// One changed line of a preview: `path:line: old` → `new`.
fn clip(line: &str) -> String {
    match line.char_indices().nth(LINE_CHARS_MAX) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

/// Whether `new` is `old` with every whole-word `from` made `to` (and something changed).
fn only_renamed(old: &str, new: &str, from: &str, to: &str) -> bool {
    if from.is_empty() || old == new {
        return false;
    }
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut out = String::with_capacity(new.len());
    let mut last = 0;
    for (at, _) in old.match_indices(from) {
        if at < last {
            continue;
        }
        let whole = !is_word(old[..at].chars().next_back())
            && !is_word(old[at + from.len()..].chars().next());
        out.push_str(&old[last..at]);
        out.push_str(if whole { to } else { from });
        last = at + from.len();
    }
    out.push_str(&old[last..]);
    out == new
}

/// The preview's text and per-file list: every changed line, bounded by [`PREVIEW_LINES_MAX`]
/// over all files; `truncated` says how many lines were left out. A line where only the name
/// `renamed` (from, to) changed is shown once, as it would read (`→ new`); any other change
/// shows the old line and the new.
pub fn render(
    changes: &[FileChange],
    workdir: &Path,
    renamed: (&str, &str),
) -> (String, Vec<LspPreviewedFile>, usize) {
    let mut text = String::new();
    let mut files = Vec::new();
    let mut shown = 0usize;
    let mut left_out = 0usize;
    for c in changes {
        let path = show_path(&c.path, workdir);
        let old: Vec<&str> = c.old.lines().collect();
        let new: Vec<&str> = c.new.lines().collect();
        let mut lines = Vec::new();
        if old.len() == new.len() {
            for (i, (o, n)) in old.iter().zip(&new).enumerate() {
                if o == n {
                    continue;
                }
                if shown >= PREVIEW_LINES_MAX {
                    left_out += 1;
                    continue;
                }
                shown += 1;
                if !only_renamed(o, n, renamed.0, renamed.1) {
                    text.push_str(&format!("{path}:{}: {}\n", i + 1, clip(o.trim_start())));
                }
                text.push_str(&format!("{path}:{}: → {}\n", i + 1, clip(n.trim_start())));
                lines.push(LspChangedLine {
                    line: i as u64 + 1,
                    old: clip(o),
                    new: clip(n),
                });
            }
        } else {
            text.push_str(&format!(
                "{path}: {} edits ({} lines become {})\n",
                c.edits,
                old.len(),
                new.len()
            ));
        }
        files.push(LspPreviewedFile {
            path,
            edits: c.edits as u64,
            lines,
        });
    }
    if left_out > 0 {
        text.push_str(&format!(
            "(showing {PREVIEW_LINES_MAX} changed lines; {left_out} more not shown)\n"
        ));
    }
    (text, files, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(path: &str, old: &str, new: &str) -> FileChange {
        FileChange {
            path: PathBuf::from(path),
            old: old.into(),
            new: new.into(),
            edits: 1,
        }
    }

    fn args() -> LspRenameArgs {
        LspRenameArgs {
            file: "a.py".into(),
            line: 1,
            symbol: "f".into(),
            new_name: "g".into(),
            occurrence: None,
            dry_run: Some(true),
        }
    }

    #[test]
    fn a_preview_lists_each_changed_line_old_and_new() {
        let c = [change(
            "/w/a.py",
            "def f():\n    pass\nf()\n",
            "def g():\n    pass\ng()\n",
        )];
        let (text, files, left_out) = render(&c, Path::new("/w"), ("h", "g"));
        assert_eq!(left_out, 0);
        assert_eq!(
            text,
            "a.py:1: def f():\na.py:1: → def g():\na.py:3: f()\na.py:3: → g()\n"
        );
        assert_eq!(files[0].lines.len(), 2);
        // Lines where only the name changed are shown once, as they would read; a line
        // changed otherwise (`ff` is not `f`) shows both.
        let c = [change(
            "/w/a.py",
            "def f():\n    ff = f\nf(ff)\n",
            "def g():\n    gg = g\ng(ff)\n",
        )];
        let (text, _, _) = render(&c, Path::new("/w"), ("f", "g"));
        assert_eq!(
            text,
            "a.py:1: → def g():\na.py:2: ff = f\na.py:2: → gg = g\na.py:3: → g(ff)\n"
        );
    }

    #[test]
    fn the_real_rename_must_equal_its_preview() {
        let p = Previews::default();
        let shown = [change("/w/a.py", "f()\n", "g()\n")];
        p.remember("r", &args(), &shown);
        assert_eq!(p.previewed("r", &args()), Some((1, 1)));
        // The same edit passes; another run or another rename is not checked.
        assert!(p.check("r", &args(), &shown, Path::new("/w")).is_ok());
        let other = [change("/w/a.py", "f()\nf()\n", "g()\ng()\n")];
        assert!(
            p.check("other-run", &args(), &other, Path::new("/w"))
                .is_ok()
        );
        let e = p.check("r", &args(), &other, Path::new("/w")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
        assert!(e.message.contains("a.py"), "{e}");
        p.forget("r");
        assert!(p.check("r", &args(), &other, Path::new("/w")).is_ok());
    }
}

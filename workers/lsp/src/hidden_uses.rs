//! Uses of a name that a server cannot see, so that an answer listing none of them does not
//! look complete.
//!
//! clangd answers `references` and `rename` from what the preprocessor let through, so a use
//! inside a `#define` body (never expanded, or expanded where clangd does not record the
//! spelling) or in a preprocessor branch that is off in this build is neither listed nor
//! renamed, and the answer looked complete while the macro still called the old name.
//! rust-analyzer likewise does not list uses inside a `macro_rules!` body or under a
//! `#[cfg(…)]` that is off (a feature not enabled): see [`rust`].
//!
//! A cheap text scan finds the candidates. For C and C++: every whole-word occurrence of the
//! identifier in code (comments and literals left out) inside a `#define` body (with its
//! continuation lines) or inside a conditional branch (`#if`, `#ifdef`, `#ifndef`, `#elif`,
//! `#else`; an include guard is not one). The candidates the server did not report are the
//! uses it may miss, and the answer says `complete: false` naming each. The scan is bounded:
//! at most [`FILES_MAX`] files of the server's language under its root, each at most
//! [`FILE_BYTES_MAX`].

mod rust;

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use crate::ops::CallCtx;
use crate::server::ServerShared;
use crate::servers::LanguageServers;

/// Files read per scan, at most.
pub const FILES_MAX: usize = 5_000;
/// Files larger than this are not read (generated tables, amalgamations).
pub const FILE_BYTES_MAX: u64 = 4 << 20;
/// Places named in an answer, at most (the count says how many there are).
pub const SHOWN_MAX: usize = 20;

/// What a scan found: the (file, 1-based line) of each hidden use, and whether the scan was
/// cut at its bounds.
#[derive(Debug, Default, PartialEq)]
pub struct Hidden {
    pub places: Vec<(PathBuf, u32)>,
    pub cut: bool,
}

/// How a language hides uses: the 1-based lines of a file's text where a word stands hidden.
pub type HiddenLines = fn(&str, &str) -> Vec<u32>;

/// The hidden uses of `word` (found by `lines`) in the files under `root` ending in one of
/// `extensions`, less those in `seen` (file, 1-based line) and those in files `readable`
/// refuses. Hidden directories, `node_modules`, `target`, `venv` and `__pycache__` are
/// skipped; special files are never opened.
pub fn scan(
    root: &Path,
    extensions: &[String],
    lines: HiddenLines,
    word: &str,
    seen: &HashSet<(PathBuf, u32)>,
    readable: &dyn Fn(&Path) -> bool,
) -> Hidden {
    let mut found = Hidden::default();
    if word.is_empty() {
        return found;
    }
    let mut files = 0usize;
    let skip_dir = |name: &str| {
        name.starts_with('.') || ["node_modules", "target", "venv", "__pycache__"].contains(&name)
    };
    crate::dependents::each_source_file(root, extensions, skip_dir, |e| {
        files += 1;
        if files > FILES_MAX {
            found.cut = true;
            return ControlFlow::Break(());
        }
        let path = e.path();
        if e.metadata().map_or(true, |m| m.len() > FILE_BYTES_MAX) {
            found.cut = true;
            return ControlFlow::Continue(());
        }
        if !readable(&path) {
            return ControlFlow::Continue(());
        }
        let Ok(text) = toolvisor_kit::special::read_to_string(&path) else {
            return ControlFlow::Continue(());
        };
        if text.contains(word) {
            for line in lines(&text, word) {
                if !seen.contains(&(path.clone(), line)) {
                    found.places.push((path.clone(), line));
                }
            }
        }
        ControlFlow::Continue(())
    });
    found
}

/// A conditional block open at a line: whether it is an include guard.
struct Frame {
    guard: bool,
}

/// The 1-based lines of `text` where `word` stands as a whole word in code inside a `#define`
/// body or a conditional branch (see the module doc).
pub fn hidden_lines(text: &str, word: &str) -> Vec<u32> {
    let mut lines = Vec::new();
    let mut in_comment = false;
    let mut continuing_define = false;
    let mut continuing_directive = false;
    let mut stack: Vec<Frame> = Vec::new();
    // `#ifndef X` just seen, waiting for `#define X` to make it an include guard.
    let mut pending_guard: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i as u32 + 1;
        let code = strip(raw, &mut in_comment);
        let continues = code.trim_end().ends_with('\\');
        if continuing_define {
            if has_word(&code, word) {
                lines.push(n);
            }
            continuing_define = continues;
            continue;
        }
        if continuing_directive {
            continuing_directive = continues;
            continue;
        }
        let trimmed = code.trim_start();
        if let Some(directive) = trimmed.strip_prefix('#') {
            let directive = directive.trim_start();
            let name: String = directive
                .chars()
                .take_while(|c| c.is_ascii_alphabetic())
                .collect();
            let rest = directive[name.len()..].trim_start();
            let guard_name = pending_guard.take();
            match name.as_str() {
                "if" | "ifdef" => stack.push(Frame { guard: false }),
                "ifndef" => {
                    stack.push(Frame { guard: false });
                    pending_guard = Some(identifier(rest).to_string());
                }
                "endif" => {
                    stack.pop();
                }
                "define" => {
                    let macro_name = identifier(rest);
                    if guard_name.as_deref() == Some(macro_name)
                        && let Some(top) = stack.last_mut()
                    {
                        top.guard = true;
                    }
                    let mut body = &rest[macro_name.len()..];
                    if body.starts_with('(') {
                        body = body.find(')').map_or("", |end| &body[end + 1..]);
                    }
                    if has_word(body, word) {
                        lines.push(n);
                    }
                    continuing_define = continues;
                    continue;
                }
                _ => {}
            }
            continuing_directive = continues;
            continue;
        }
        if !trimmed.is_empty() {
            pending_guard = None;
        }
        if stack.iter().any(|f| !f.guard) && has_word(&code, word) {
            lines.push(n);
        }
    }
    lines
}

/// The identifier at the start of `s`.
fn identifier(s: &str) -> &str {
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
        .map_or(s.len(), |(i, _)| i);
    &s[..end]
}

/// Whether `word` stands in `code` as a whole word.
fn has_word(code: &str, word: &str) -> bool {
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    code.match_indices(word).any(|(at, _)| {
        !is_word(code[..at].chars().next_back()) && !is_word(code[at + word.len()..].chars().next())
    })
}

/// `line` with comments and the insides of string and character literals blanked (a block
/// comment may run on from an earlier line: `in_comment`).
fn strip(line: &str, in_comment: &mut bool) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if *in_comment {
            if c == '*' && chars.peek() == Some(&'/') {
                chars.next();
                *in_comment = false;
            }
            out.push(' ');
            continue;
        }
        if let Some(q) = quote {
            if c == '\\' {
                chars.next();
            } else if c == q {
                quote = None;
                out.push(c);
                continue;
            }
            out.push(' ');
            continue;
        }
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                *in_comment = true;
                out.push(' ');
            }
            '"' | '\'' => {
                quote = Some(c);
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    // A continuation backslash ends a line even after a stripped comment.
    if line.trim_end().ends_with('\\') && !out.trim_end().ends_with('\\') {
        out.push('\\');
    }
    out
}

/// "core.h:7, main.c:12" for the first [`SHOWN_MAX`] places, shown relative to `base`.
pub fn show(places: &[(PathBuf, u32)], base: &Path) -> String {
    let mut shown: Vec<String> = places
        .iter()
        .take(SHOWN_MAX)
        .map(|(p, l)| format!("{}:{l}", crate::render::show_path(p, base)))
        .collect();
    if places.len() > SHOWN_MAX {
        shown.push(format!("and {} more", places.len() - SHOWN_MAX));
    }
    shown.join(", ")
}

/// What an answer about `word`, asked from `asked`, may miss because of where the server
/// does not look: inside macros and disabled branches (clangd, rust-analyzer), or behind a
/// stub (pyright resolves a use made through a `.pyi` to the stub's declaration, so an answer
/// asked from the `.py` side misses every use that went through a stub, such as a package's
/// `__init__.pyi` re-exporting a name from `_impl.py`). `None` for other servers, or when every
/// such place is in `seen` (the server's locations: file, 1-based line); a stub holding the name
/// on a line the answer includes is one the server followed. `missed` says what that means for
/// the answer ("the rename does not change them"). The scan runs on the blocking pool.
pub(crate) async fn gap(
    ctx: &CallCtx,
    servers: &LanguageServers,
    shared: &ServerShared,
    asked: &Path,
    word: &str,
    seen: HashSet<(PathBuf, u32)>,
    missed: &str,
) -> Option<String> {
    let mut extensions = servers
        .languages()
        .get(&shared.language)
        .map(|s| s.extensions.clone())
        .unwrap_or_default();
    let (lines, blind_to): (HiddenLines, &str) = if shared.flavor.clangd {
        (
            hidden_lines,
            "`#define` bodies or preprocessor branches that are off",
        )
    } else if shared.flavor.rust_analyzer {
        (
            rust::hidden_lines,
            "`macro_rules!` bodies or code under a `#[cfg(…)]` that is off (a feature not enabled)",
        )
    } else if shared.flavor.pyright && asked.extension().is_some_and(|e| e == "py") {
        // A stub beside the asked module is `coverage::stub_gap`'s to name.
        let beside = asked.with_extension("pyi");
        if tokio::task::spawn_blocking(move || beside.is_file())
            .await
            .unwrap_or(false)
        {
            return None;
        }
        extensions = vec!["pyi".to_string()];
        (stub_lines, "")
    } else {
        return None;
    };
    let stubs = blind_to.is_empty();
    let (root, word_owned, ctx_owned) = (shared.root.clone(), word.to_string(), ctx.clone());
    let found = tokio::task::spawn_blocking(move || {
        scan(&root, &extensions, lines, &word_owned, &seen, &|p| {
            ctx_owned.may_read(p)
        })
    })
    .await
    .ok()?;
    if found.places.is_empty() && !found.cut {
        return None;
    }
    let cut = match found.cut {
        true => format!(
            " (the scan read at most {FILES_MAX} files of at most {} MiB each, so there may be more)",
            FILE_BYTES_MAX >> 20
        ),
        false => String::new(),
    };
    if found.places.is_empty() {
        let what = match stubs {
            true => "uses made through a `.pyi` stub when asked from the `.py` side".to_string(),
            false => format!("uses inside {blind_to}"),
        };
        return Some(format!(
            "{} does not see {what}, and not every file could be scanned for them{cut}; grep for `{word}`",
            shared.id
        ));
    }
    let places = show(&found.places, &ctx.workdir);
    let n = found.places.len();
    let plural = if n == 1 { "" } else { "s" };
    if stubs {
        // Point at a line that declares the name (a `def`, a `class`, an annotation) before
        // one that imports it again; the stubs are read on the blocking pool.
        let (places_owned, word_owned, ctx_owned) =
            (found.places.clone(), word.to_string(), ctx.clone());
        let (file, line) = tokio::task::spawn_blocking(move || {
            let word = word_owned.as_str();
            let declares = |(file, line): &&(PathBuf, u32)| {
                let text = ctx_owned.read_text(file).unwrap_or_default();
                let code = text
                    .lines()
                    .nth(*line as usize - 1)
                    .unwrap_or("")
                    .trim_start();
                ["def ", "async def ", "class "]
                    .iter()
                    .any(|k| code.strip_prefix(k).is_some_and(|r| r.starts_with(word)))
                    || code
                        .strip_prefix(word)
                        .is_some_and(|r| r.trim_start().starts_with([':', '=']))
            };
            places_owned
                .iter()
                .find(declares)
                .unwrap_or(&places_owned[0])
                .clone()
        })
        .await
        .ok()?;
        return Some(format!(
            "{} resolves a use made through a stub to the stub, and `{word}` stands in {n} stub line{plural} this answer does not include, {places}: the uses that go through them are missing; ask the same question from the stub (`file`: {}, `line`: {line}), or grep{cut}",
            shared.id,
            crate::render::show_path(&file, &ctx.workdir),
        ));
    }
    Some(format!(
        "{} does not see uses inside {blind_to}: `{word}` stands in {n} such place{plural} it did not report, {places}; {missed}{cut}",
        shared.id,
    ))
}

/// The 1-based lines of a Python stub's `text` where `word` stands as a whole word outside a
/// `#` comment.
pub fn stub_lines(text: &str, word: &str) -> Vec<u32> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let code = line.split('#').next().unwrap_or("");
            has_word(code, word)
        })
        .map(|(i, _)| i as u32 + 1)
        .collect()
}

/// Two gaps as one reason.
pub(crate) fn join(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uses_in_macro_bodies_and_branches_count_comments_and_guards_do_not() {
        let header = "#ifndef CORE_H\n#define CORE_H\n\nint enlist(int x);\n\n#define TWICE(v) \\\n    (enlist(v) + enlist(v))\n#define enlisted 1\n\n#endif\n";
        assert_eq!(
            hidden_lines(header, "enlist"),
            vec![7],
            "the guard is no branch"
        );
        let main = "/* enlist\n   enlist */\nint run(void) {\n    int n = enlist(1); // enlist\n#ifdef LEGACY\n    n += enlist(2);\n    char *s = \"enlist\";\n#else\n    n += enlist(3);\n#endif\n    return n;\n}\n#define CALL enlist\n";
        assert_eq!(hidden_lines(main, "enlist"), vec![6, 9, 13]);
        // An #ifndef that guards nothing is a branch.
        let t = "#ifndef FAST\nint a = enlist(1);\n#endif\n";
        assert_eq!(hidden_lines(t, "enlist"), vec![2]);
    }

    #[test]
    fn a_stub_line_holds_the_name_outside_comments() {
        let stub = "from ._make import fields_dict as fields_dict\n# fields_dict is here\ndef fields_dict(cls: type) -> dict: ...\ndef fields_dicts() -> None: ...\n";
        assert_eq!(stub_lines(stub, "fields_dict"), vec![1, 3]);
    }

    #[test]
    fn a_scan_leaves_out_what_the_server_saw() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("a.h"), "#define TWICE(v) (enlist(v) + 1)\n").unwrap();
        std::fs::write(root.join("b.c"), "#if 0\nenlist(1);\n#endif\n").unwrap();
        std::fs::write(root.join("c.txt"), "#define X enlist\n").unwrap();
        let ext = vec!["c".to_string(), "h".to_string()];
        let seen = HashSet::from([(root.join("b.c"), 2)]);
        let found = scan(root, &ext, hidden_lines, "enlist", &seen, &|_| true);
        assert_eq!(found.places, vec![(root.join("a.h"), 1)]);
        assert!(!found.cut);
        let none = scan(root, &ext, hidden_lines, "enlist", &seen, &|p| {
            !p.ends_with("a.h")
        });
        assert!(none.places.is_empty(), "{none:?}");
    }
}

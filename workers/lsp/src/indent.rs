//! The indentation `lsp_edit format` asks a server for (`FormattingOptions`): the file's
//! `.editorconfig` (`indent_style`, `indent_size`, `tab_width`, `insert_final_newline`,
//! `trim_trailing_whitespace`; the nearest file wins, and within one the last matching
//! section; the search stops at a file saying `root = true`), else the indentation the file
//! already has (tabs, or the most common step between indented lines), else 4 spaces.

use std::path::Path;

use globset::GlobBuilder;
use serde_json::{Value, json};

/// `FormattingOptions` for `path` whose text is `text`, and where each came from.
pub fn formatting_options(path: &Path, text: &str) -> (Value, String) {
    let config = editorconfig(path);
    let detected = detect(text);
    let insert_spaces = match config.indent_style.as_deref() {
        Some("tab") => false,
        Some("space") => true,
        _ => detected.is_none_or(|d| d.spaces),
    };
    let number = |v: &Option<String>| v.as_deref().and_then(|s| s.parse::<u64>().ok());
    // A tab's width for tabs, the indentation step for spaces (`indent_size = tab`: the tab's).
    let (first, second) = if insert_spaces {
        (number(&config.indent_size), number(&config.tab_width))
    } else {
        (number(&config.tab_width), number(&config.indent_size))
    };
    let size = first
        .or(second)
        .or_else(|| detected.and_then(|d| d.width))
        .unwrap_or(4);
    let from = match (
        config.indent_style.is_some() || config.indent_size.is_some(),
        detected,
    ) {
        (true, _) => ".editorconfig".to_string(),
        (false, Some(_)) => "the file's own indentation".to_string(),
        (false, None) => "the default (4 spaces)".to_string(),
    };
    let mut options = json!({
        "tabSize": size,
        "insertSpaces": insert_spaces,
        "trimTrailingWhitespace": config.trim_trailing_whitespace.unwrap_or(true),
        "insertFinalNewline": config.insert_final_newline.unwrap_or(true),
        "trimFinalNewlines": true,
    });
    if config.insert_final_newline == Some(false) {
        options["trimFinalNewlines"] = json!(false);
    }
    (options, from)
}

#[derive(Default, Debug)]
struct EditorConfig {
    indent_style: Option<String>,
    indent_size: Option<String>,
    tab_width: Option<String>,
    insert_final_newline: Option<bool>,
    trim_trailing_whitespace: Option<bool>,
}

/// The `.editorconfig` settings for `path`: files from the farthest to the nearest (nearer
/// ones override), at most 32 directories up.
fn editorconfig(path: &Path) -> EditorConfig {
    let mut files = Vec::new();
    for dir in path.ancestors().skip(1).take(32) {
        let f = dir.join(".editorconfig");
        if let Ok(text) = toolvisor_kit::special::read_to_string(&f) {
            let root = text.lines().any(|l| {
                let l = l.trim().to_ascii_lowercase();
                l.replace(' ', "") == "root=true"
            });
            files.push((dir.to_path_buf(), text));
            if root {
                break;
            }
        }
    }
    let mut out = EditorConfig::default();
    for (dir, text) in files.iter().rev() {
        let Ok(rel) = path.strip_prefix(dir) else {
            continue;
        };
        let mut applies = false;
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                applies = section_matches(section, rel);
                continue;
            }
            if !applies {
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase());
            let flag = |v: &str| match v {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            };
            match k.as_str() {
                "indent_style" => out.indent_style = Some(v),
                "indent_size" => out.indent_size = Some(v),
                "tab_width" => out.tab_width = Some(v),
                "insert_final_newline" => out.insert_final_newline = flag(&v),
                "trim_trailing_whitespace" => out.trim_trailing_whitespace = flag(&v),
                _ => {}
            }
        }
    }
    out
}

/// An editorconfig section glob against `rel` (the file's path from the `.editorconfig`'s
/// directory): a glob without `/` matches the file name at any depth.
fn section_matches(section: &str, rel: &Path) -> bool {
    let pattern = if section.contains('/') {
        section.trim_start_matches('/').to_string()
    } else {
        format!("**/{section}")
    };
    GlobBuilder::new(&pattern)
        .literal_separator(true)
        .build()
        .is_ok_and(|g| g.compile_matcher().is_match(rel))
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Detected {
    spaces: bool,
    /// The indentation step, for spaces.
    width: Option<u64>,
}

/// The file's own indentation: tabs if more indented lines start with a tab than with
/// spaces; for spaces, the most common increase between successive indented lines.
fn detect(text: &str) -> Option<Detected> {
    let (mut tabs, mut spaced) = (0, 0);
    let mut steps = std::collections::BTreeMap::<u64, usize>::new();
    let mut last = 0u64;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if line.starts_with('\t') {
            tabs += 1;
            continue;
        }
        let width = (line.len() - line.trim_start_matches(' ').len()) as u64;
        if width > 0 {
            spaced += 1;
        }
        if width > last {
            *steps.entry(width - last).or_default() += 1;
        }
        last = width;
    }
    if tabs == 0 && spaced == 0 {
        return None;
    }
    if tabs > spaced {
        return Some(Detected {
            spaces: false,
            width: None,
        });
    }
    let width = steps
        .iter()
        .filter(|(w, _)| (1..=8).contains(*w))
        .max_by_key(|(w, n)| (**n, std::cmp::Reverse(**w)))
        .map(|(w, _)| *w);
    Some(Detected {
        spaces: true,
        width,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_own_indentation_is_kept() {
        let two = "function f() {\n  if (x) {\n    y();\n  }\n}\n";
        assert_eq!(
            detect(two),
            Some(Detected {
                spaces: true,
                width: Some(2)
            })
        );
        let tabs = "def f():\n\treturn 1\n\ndef g():\n\tif x:\n\t\treturn 2\n";
        assert_eq!(detect(tabs).map(|d| d.spaces), Some(false));
        assert_eq!(detect("x = 1\n"), None);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.ts");
        let (o, from) = formatting_options(&f, two);
        assert_eq!(
            (o["tabSize"].as_u64(), o["insertSpaces"].as_bool()),
            (Some(2), Some(true))
        );
        assert_eq!(from, "the file's own indentation");
        let (o, from) = formatting_options(&f, "x\n");
        assert_eq!(o["tabSize"], 4);
        assert!(from.contains("default"));
    }

    #[test]
    fn editorconfig_wins_nearest_and_last_section_first() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::write(
            root.join(".editorconfig"),
            "root = true\n\n[*]\nindent_style = space\nindent_size = 8\n\n[*.{ts,js}]\nindent_size = 3\n",
        )
        .unwrap();
        std::fs::write(
            root.join("src/.editorconfig"),
            "[deep/*.ts]\nindent_style = tab\ntab_width = 5\n",
        )
        .unwrap();
        let two = "a\n  b\n";
        let (o, from) = formatting_options(&root.join("x.py"), two);
        assert_eq!(
            (o["tabSize"].as_u64(), from.as_str()),
            (Some(8), ".editorconfig")
        );
        let (o, _) = formatting_options(&root.join("src/x.ts"), two);
        assert_eq!(o["tabSize"], 3);
        let (o, _) = formatting_options(&root.join("src/deep/x.ts"), two);
        assert_eq!(
            (o["insertSpaces"].as_bool(), o["tabSize"].as_u64()),
            (Some(false), Some(5))
        );
    }

    /// A FIFO named `.editorconfig` (a `bash` call can make one) is passed by, never waited
    /// on: the old code opened it and `lsp_edit` waited for a writer for ever.
    #[test]
    fn a_fifo_editorconfig_is_passed_by_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(
            root.join(".editorconfig"),
            "root = true\n[*]\nindent_style = space\nindent_size = 6\n",
        )
        .unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(root.join("src/.editorconfig"))
            .status()
            .unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(formatting_options(&root.join("src/x.py"), "a\n  b\n"));
        });
        let (o, from) = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("reading the editorconfig waited on the FIFO");
        assert_eq!(
            (o["tabSize"].as_u64(), from.as_str()),
            (Some(6), ".editorconfig")
        );
    }
}

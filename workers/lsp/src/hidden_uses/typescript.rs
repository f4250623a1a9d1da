//! typescript-language-server and projects inside projects: a `tsconfig.json` (or
//! `jsconfig.json`) in a directory under the root makes that directory a project of its own
//! (ts-pattern's `tests/tsconfig.json` beside a root `tsconfig.json` that includes `src/`
//! only), and tsserver searches a project only once a file of it has been opened. Asked from
//! the outer project, `references` found 4 of 8 uses of `NonExhaustiveError`, and the answer
//! depended on what had been asked before.
//!
//! Every whole-word use of the name (comments and literals left out) in a file under such a
//! nested project that the answer does not include is a place it may miss.
//!
//! So is a use in a TypeScript file the root's own `tsconfig.json` leaves out (its `include`
//! and `files` do not name it, or its `exclude` does: rxjs's `scripts/check2.ts` beside an
//! `include` of `src/`): tsserver sees such a file only while it is open, so an answer
//! depended on whether something had opened it. Declaration files (`.d.ts`), a project's
//! `outDir`/`declarationDir` and JavaScript are left out of this (built output, not source).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::{Hider, has_word, strip};

/// The files that make a directory a project of its own.
const PROJECT_FILES: &[&str] = &["tsconfig.json", "jsconfig.json"];

pub struct TsHider {
    word: String,
    root: PathBuf,
    /// Whether a directory holds a project file (stat once each).
    is_project: HashMap<PathBuf, bool>,
    places: Vec<(PathBuf, u32)>,
    /// The nested projects that hold the name.
    projects: Vec<PathBuf>,
    /// The root's own project, when its `tsconfig.json` says which files it takes: read once,
    /// at the first file (on the scan's blocking thread), and only when the caller may read
    /// it (`read_config`).
    own: Option<Option<Members>>,
    read_config: bool,
}

/// Which files a `tsconfig.json` takes: `files`, else `include` (default everything), less
/// `exclude` (default `node_modules` and the like, and its output directories).
struct Members {
    dir: PathBuf,
    files: HashSet<PathBuf>,
    include: Option<globset::GlobSet>,
    exclude: globset::GlobSet,
    out: Vec<PathBuf>,
}

impl Members {
    /// The project `dir/tsconfig.json` describes, if it parses (JSON with comments and
    /// trailing commas, as tsc reads it).
    fn read(dir: &Path) -> Option<Members> {
        let text = std::fs::read_to_string(dir.join("tsconfig.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&jsonc(&text)).ok()?;
        let strings = |key: &str| -> Option<Vec<String>> {
            v.get(key)?.as_array().map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
        };
        let globs = |patterns: &[String]| -> Option<globset::GlobSet> {
            let mut set = globset::GlobSetBuilder::new();
            for p in patterns {
                let p = p.trim_start_matches("./").trim_end_matches('/');
                // A directory (no wildcard, no extension) stands for everything under it.
                let last = p.rsplit('/').next().unwrap_or(p);
                let dir_like = !p.contains(['*', '?']) && !last.contains('.');
                for pattern in [p.to_string(), format!("{p}/**/*")] {
                    if pattern == p && dir_like {
                        continue;
                    }
                    let glob = globset::GlobBuilder::new(&pattern)
                        .literal_separator(true)
                        .build()
                        .ok()?;
                    set.add(glob);
                    if !dir_like {
                        break;
                    }
                }
            }
            set.build().ok()
        };
        let files: HashSet<PathBuf> = strings("files")
            .unwrap_or_default()
            .iter()
            .map(|f| dir.join(f.trim_start_matches("./")))
            .collect();
        let include = match strings("include") {
            Some(patterns) => Some(globs(&patterns)?),
            None if files.is_empty() => None,
            None => Some(globset::GlobSet::empty()),
        };
        let exclude = globs(&strings("exclude").unwrap_or_else(|| {
            ["node_modules", "bower_components", "jspm_packages"]
                .map(String::from)
                .to_vec()
        }))?;
        let out = ["outDir", "declarationDir"]
            .iter()
            .filter_map(|k| v.pointer(&format!("/compilerOptions/{k}"))?.as_str())
            .map(|d| dir.join(d.trim_start_matches("./")))
            .collect();
        Some(Members {
            dir: dir.to_path_buf(),
            files,
            include,
            exclude,
            out,
        })
    }

    /// Whether the project takes `path`.
    fn takes(&self, path: &Path) -> bool {
        if self.files.contains(path) {
            return true;
        }
        let Ok(rel) = path.strip_prefix(&self.dir) else {
            return false;
        };
        let included = self.include.as_ref().is_none_or(|set| set.is_match(rel));
        included && !self.exclude.is_match(rel)
    }

    /// Whether `path` is a TypeScript source file this project could take (not a declaration
    /// file, not under its output directories).
    fn source(&self, path: &Path) -> bool {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let ts = [".ts", ".tsx", ".mts", ".cts"]
            .iter()
            .any(|e| name.ends_with(e));
        let declaration = [".d.ts", ".d.mts", ".d.cts"]
            .iter()
            .any(|e| name.ends_with(e));
        ts && !declaration && !self.out.iter().any(|o| path.starts_with(o))
    }
}

/// JSON with comments and trailing commas (tsconfig's) as plain JSON.
fn jsonc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => out.extend(chars.next()),
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            _ => out.push(c),
        }
    }
    // A comma before a closing bracket goes.
    let mut cleaned = String::with_capacity(out.len());
    let mut in_string = false;
    let bytes: Vec<char> = out.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            cleaned.push(c);
            if c == '\\' && i + 1 < bytes.len() {
                cleaned.push(bytes[i + 1]);
                i += 2;
                continue;
            }
            in_string = c != '"';
        } else if c == '"' {
            in_string = true;
            cleaned.push(c);
        } else if c == ',' {
            let next = bytes[i + 1..].iter().find(|c| !c.is_whitespace());
            if !matches!(next, Some('}') | Some(']')) {
                cleaned.push(c);
            }
        } else {
            cleaned.push(c);
        }
        i += 1;
    }
    cleaned
}

impl TsHider {
    /// A scan for `word` under `root`; `read_config`: whether the caller may read the root's
    /// `tsconfig.json` (its scope).
    pub fn new(word: &str, root: &Path, read_config: bool) -> TsHider {
        TsHider {
            word: word.to_string(),
            root: root.to_path_buf(),
            is_project: HashMap::new(),
            places: Vec::new(),
            projects: Vec::new(),
            own: None,
            read_config,
        }
    }

    /// The innermost project directory strictly inside the root that holds `path`.
    fn nested_project(&mut self, path: &Path) -> Option<PathBuf> {
        let mut dir = path.parent()?;
        while dir != self.root && dir.starts_with(&self.root) {
            let project = *self.is_project.entry(dir.to_path_buf()).or_insert_with(|| {
                PROJECT_FILES
                    .iter()
                    .any(|f| std::fs::symlink_metadata(dir.join(f)).is_ok_and(|m| m.is_file()))
            });
            if project {
                return Some(dir.to_path_buf());
            }
            dir = dir.parent()?;
        }
        None
    }
}

impl Hider for TsHider {
    fn file(&mut self, path: &Path, text: &str) {
        if self.word.is_empty() || !text.contains(&self.word) {
            return;
        }
        let nested = self.nested_project(path);
        let (root, read_config) = (self.root.clone(), self.read_config);
        let own = self
            .own
            .get_or_insert_with(|| read_config.then(|| Members::read(&root)).flatten());
        // A file of the root's project that its tsconfig leaves out.
        let left_out = nested.is_none()
            && own
                .as_ref()
                .is_some_and(|m| m.source(path) && !m.takes(path));
        if nested.is_none() && !left_out {
            return;
        }
        let mut in_comment = false;
        let mut any = false;
        for (i, raw) in text.lines().enumerate() {
            let code = strip(raw, &mut in_comment);
            if has_word(&code, &self.word) {
                self.places.push((path.to_path_buf(), i as u32 + 1));
                any = true;
            }
        }
        if let Some(project) = nested
            && any
            && !self.projects.contains(&project)
        {
            self.projects.push(project);
        }
    }

    fn places(&mut self, _seen: &HashSet<(PathBuf, u32)>) -> Vec<(PathBuf, u32)> {
        std::mem::take(&mut self.places)
    }

    fn ask_from(
        &self,
        places: &[(PathBuf, u32)],
        read: &dyn Fn(&Path) -> Option<String>,
    ) -> Option<(PathBuf, u32)> {
        // From a file of a nested project its own server answers, and the outer root's is
        // asked too and merged (`crate::roots`). The line to name is one a question can be
        // asked from: the name once (no `occurrence` needed), not an import (no call
        // hierarchy there, and a rename there renames the local alias), not a member access
        // (`x.pick(` may be another `pick`).
        let mut texts: HashMap<&Path, Option<String>> = HashMap::new();
        let score = |text: &str| {
            let code = text.trim_start();
            let once = code.matches(self.word.as_str()).count() == 1;
            let import = code.starts_with("import ")
                || (code.starts_with("export ") && code.contains(" from "));
            let member = code
                .match_indices(self.word.as_str())
                .any(|(at, _)| code[..at].ends_with('.'));
            u8::from(once) + u8::from(!import) * 2 + u8::from(!member)
        };
        places
            .iter()
            // A file the tsconfig leaves out answers for its own inferred project only.
            .filter(|(p, _)| self.projects.iter().any(|proj| p.starts_with(proj)))
            .max_by_key(|(p, line)| {
                let text = texts.entry(p.as_path()).or_insert_with(|| read(p));
                let line_text = text
                    .as_deref()
                    .and_then(|t| t.lines().nth((*line as usize).saturating_sub(1)))
                    .unwrap_or("");
                // The first of the best: ties keep the earlier place.
                (score(line_text), std::cmp::Reverse((p.clone(), *line)))
            })
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_the_root_tsconfig_leaves_out_is_a_place_built_output_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in ["src", "scripts", "dist", "spec"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(
            root.join("tsconfig.json"),
            "{\n  // rxjs-like\n  \"compilerOptions\": {\"outDir\": \"./dist\",},\n  \"include\": [\"src\", \"spec/**/*.spec.ts\"],\n  \"exclude\": [\"src/internal/*.skip.ts\"],\n}\n",
        )
        .unwrap();
        let mut h = TsHider::new("operate", root, true);
        let use_it = "import { operate } from '../src/lift';\noperate();\n";
        for f in [
            "src/lift.ts",
            "src/internal/a.skip.ts",
            "spec/lift.spec.ts",
            "spec/helper.ts",
            "scripts/check2.ts",
            "dist/lift.ts",
            "src/types.d.ts",
        ] {
            h.file(&root.join(f), use_it);
        }
        let files: Vec<PathBuf> = h
            .places(&HashSet::new())
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        let want: Vec<PathBuf> = [
            "src/internal/a.skip.ts",
            "src/internal/a.skip.ts",
            "spec/helper.ts",
            "spec/helper.ts",
            "scripts/check2.ts",
            "scripts/check2.ts",
        ]
        .iter()
        .map(|f| root.join(f))
        .collect();
        assert_eq!(files, want);
        // No nested project: nothing to ask from.
        let read = |p: &Path| std::fs::read_to_string(p).ok();
        assert_eq!(
            h.ask_from(&[(root.join("scripts/check2.ts"), 2)], &read),
            None
        );
        // No tsconfig, or one without include and files: everything is the project's.
        assert!(Members::read(&root.join("src")).is_none());
        std::fs::write(root.join("tsconfig.json"), "{}").unwrap();
        let mut h = TsHider::new("operate", root, true);
        h.file(&root.join("scripts/check2.ts"), use_it);
        assert!(h.places(&HashSet::new()).is_empty());
    }

    #[test]
    fn uses_under_a_nested_project_are_places_the_outer_one_may_miss() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("tests/unit")).unwrap();
        std::fs::write(root.join("tsconfig.json"), "{}").unwrap();
        std::fs::write(root.join("tests/tsconfig.json"), "{}").unwrap();
        let mut h = TsHider::new("NonExhaustiveError", root, true);
        h.file(
            &root.join("src/errors.ts"),
            "export class NonExhaustiveError extends Error {}\n",
        );
        h.file(
            &root.join("tests/unit/a.test.ts"),
            "import { NonExhaustiveError } from '../../src';\n// NonExhaustiveError\nconst s = 'NonExhaustiveError';\nthrow new NonExhaustiveError();\n",
        );
        assert_eq!(
            h.places(&HashSet::new()),
            vec![
                (root.join("tests/unit/a.test.ts"), 1),
                (root.join("tests/unit/a.test.ts"), 4)
            ]
        );
        assert_eq!(h.projects, vec![root.join("tests")]);
        // The line to ask from: the use, not the import.
        let places = vec![
            (root.join("tests/unit/a.test.ts"), 1),
            (root.join("tests/unit/a.test.ts"), 4),
        ];
        let read = |p: &Path| std::fs::read_to_string(p).ok();
        std::fs::write(
            root.join("tests/unit/a.test.ts"),
            "import { NonExhaustiveError } from '../../src';\n// NonExhaustiveError\nconst s = 'NonExhaustiveError';\nthrow new NonExhaustiveError();\n",
        )
        .unwrap();
        assert_eq!(
            h.ask_from(&places, &read),
            Some((root.join("tests/unit/a.test.ts"), 4))
        );
    }
}

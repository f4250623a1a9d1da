//! typescript-language-server and projects inside projects: a `tsconfig.json` (or
//! `jsconfig.json`) in a directory under the root makes that directory a project of its own
//! (ts-pattern's `tests/tsconfig.json` beside a root `tsconfig.json` that includes `src/`
//! only), and tsserver searches a project only once a file of it has been opened. Asked from
//! the outer project, `references` found 4 of 8 uses of `NonExhaustiveError`, and the answer
//! depended on what had been asked before.
//!
//! Every whole-word use of the name (comments and literals left out) in a file under such a
//! nested project that the answer does not include is a place it may miss.

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
}

impl TsHider {
    pub fn new(word: &str, root: &Path) -> TsHider {
        TsHider {
            word: word.to_string(),
            root: root.to_path_buf(),
            is_project: HashMap::new(),
            places: Vec::new(),
            projects: Vec::new(),
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
        let Some(project) = self.nested_project(path) else {
            return;
        };
        let mut in_comment = false;
        let mut any = false;
        for (i, raw) in text.lines().enumerate() {
            let code = strip(raw, &mut in_comment);
            if has_word(&code, &self.word) {
                self.places.push((path.to_path_buf(), i as u32 + 1));
                any = true;
            }
        }
        if any && !self.projects.contains(&project) {
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
    fn uses_under_a_nested_project_are_places_the_outer_one_may_miss() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("tests/unit")).unwrap();
        std::fs::write(root.join("tsconfig.json"), "{}").unwrap();
        std::fs::write(root.join("tests/tsconfig.json"), "{}").unwrap();
        let mut h = TsHider::new("NonExhaustiveError", root);
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

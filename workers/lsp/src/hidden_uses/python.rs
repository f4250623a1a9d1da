//! pyright and stubs: pyright resolves a name through a `.pyi` stub wherever one applies, so
//! the uses that went through a stub are linked to the stub's declaration, not to the
//! definition in the `.py`. An answer asked from the `.py` side misses them (attrs:
//! `attr/__init__.pyi` declares `fields_dict` again, and references from `_make.py` found 7 of
//! 15), and an import the stub of its module lacks is linked to nothing (more-itertools:
//! `from .recipes import UnequalIterablesError` in `more.py`, which `recipes.pyi` does not
//! declare, so references and a rename left it and its `__all__` entry behind).
//!
//! Only in a project with stubs: every `.pyi` line holding the name, and every `.py` line
//! importing it (`from m import …`, also inside parentheses over several lines) or listing it
//! in `__all__`, that the answer does not include, is a place it may miss, and so is every use
//! of the name in a `.py` file whose import of it the answer does not include. A name declared as
//! a member (an indented `def`/`class` among the answer's lines) is not matched with stub lines
//! at the top level of a module, nor with imports, and a top-level one not with indented stub
//! lines: `peekable.prepend` is not the module function `prepend`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{Hider, has_word};

/// A line holding the name: where, whether indented, whether in a stub.
#[derive(Clone)]
struct Line {
    path: PathBuf,
    line: u32,
    indented: bool,
    stub: bool,
}

pub struct PyHider {
    word: String,
    calls: bool,
    any_stub: bool,
    found: Vec<Line>,
    /// Lines declaring the name (`def`, `async def`, `class`), anywhere.
    declarations: Vec<Line>,
    /// Every other line of a `.py` file holding the name in code: where an import of it was
    /// not linked, the file's uses of it are not either.
    uses: Vec<Line>,
    /// Doctest lines (`>>> name(…)` in a docstring): pyright does not analyse them.
    doctests: Vec<Line>,
    /// Uses of an alias the name is imported as (`from .i18n import _gettext as _`, then
    /// `_(…)`): pyright links them to the alias, not to the name.
    alias_uses: Vec<Line>,
}

impl PyHider {
    /// `calls`: the question is a call hierarchy's callers, which stub and import lines are
    /// not (doctest calls and calls through an alias are).
    pub fn new(word: &str, calls: bool) -> PyHider {
        PyHider {
            calls,
            word: word.to_string(),
            any_stub: false,
            found: Vec::new(),
            declarations: Vec::new(),
            uses: Vec::new(),
            doctests: Vec::new(),
            alias_uses: Vec::new(),
        }
    }
}

/// Whether `code` (a line, trimmed at the start) declares `word` with `def` or `class`.
fn declares(code: &str, word: &str) -> bool {
    ["def ", "async def ", "class "].iter().any(|k| {
        code.strip_prefix(k)
            .and_then(|r| r.strip_prefix(word))
            .is_some_and(|r| !r.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    })
}

impl Hider for PyHider {
    fn file(&mut self, path: &Path, text: &str) {
        let stub = path.extension().is_some_and(|e| e == "pyi");
        self.any_stub |= stub;
        if !text.contains(&self.word) {
            return;
        }
        // Inside `from m import (` … `)`, or `__all__ = [` … `]`.
        let mut in_import = false;
        let mut in_all = false;
        let mut aliases: Vec<String> = Vec::new();
        let mut import_lines: HashSet<usize> = HashSet::new();
        for (i, raw) in text.lines().enumerate() {
            let at = |indented| Line {
                path: path.to_path_buf(),
                line: i as u32 + 1,
                indented,
                stub,
            };
            let doctest = raw.trim_start();
            if (doctest.starts_with(">>> ") || doctest.starts_with("... "))
                && has_word(doctest, &self.word)
            {
                self.doctests.push(at(true));
                continue;
            }
            let code = raw.split('#').next().unwrap_or("");
            let trimmed = code.trim_start();
            if trimmed.starts_with("import ") || trimmed.starts_with("from ") || in_import {
                import_lines.insert(i);
                for alias in aliased(code, &self.word) {
                    if !aliases.contains(&alias) {
                        aliases.push(alias);
                    }
                }
            }
            let starts_import = trimmed.starts_with("from ") && trimmed.contains(" import ");
            let starts_all = trimmed.starts_with("__all__");
            let listed = in_import || in_all || starts_import || starts_all;
            if has_word(code, &self.word) {
                let line = Line {
                    path: path.to_path_buf(),
                    line: i as u32 + 1,
                    indented: raw.starts_with([' ', '\t']),
                    stub,
                };
                if declares(trimmed, &self.word) {
                    self.declarations.push(line.clone());
                    self.found.push(line);
                } else if stub || listed {
                    self.found.push(line);
                } else {
                    self.uses.push(line);
                }
            }
            if starts_import && trimmed.contains('(') && !trimmed.contains(')') {
                in_import = true;
            } else if in_import && code.contains(')') {
                in_import = false;
            }
            let opens = trimmed.contains('[') || trimmed.contains('(');
            let closes = |c: &str| c.contains(']') || c.contains(')');
            if starts_all && opens && !closes(trimmed) {
                in_all = true;
            } else if in_all && closes(code) {
                in_all = false;
            }
        }
        if aliases.is_empty() || stub {
            return;
        }
        for (i, raw) in text.lines().enumerate() {
            let code = raw.split('#').next().unwrap_or("");
            if import_lines.contains(&i) {
                continue;
            }
            let used = aliases.iter().any(|a| match a.chars().count() {
                // `_` names a throwaway too: only its calls count.
                1 => has_word(code, a) && code.contains(&format!("{a}(")),
                _ => has_word(code, a),
            });
            if used {
                self.alias_uses.push(Line {
                    path: path.to_path_buf(),
                    line: i as u32 + 1,
                    indented: raw.starts_with([' ', '\t']),
                    stub,
                });
            }
        }
    }

    fn ask_from(
        &self,
        places: &[(PathBuf, u32)],
        read: &dyn Fn(&Path) -> Option<String>,
    ) -> Option<(PathBuf, u32)> {
        declaring(places, &self.word, read)
    }

    fn places(&mut self, seen: &HashSet<(PathBuf, u32)>) -> Vec<(PathBuf, u32)> {
        let mut out: Vec<(PathBuf, u32)> = self
            .doctests
            .iter()
            .chain(&self.alias_uses)
            .map(|l| (l.path.clone(), l.line))
            .collect();
        if !self.calls {
            out.extend(self.stub_places(seen));
        }
        out
    }
}

impl PyHider {
    /// The places a stub hides (see the module doc), where the project has stubs.
    fn stub_places(&self, seen: &HashSet<(PathBuf, u32)>) -> Vec<(PathBuf, u32)> {
        if !self.any_stub {
            return Vec::new();
        }
        // The level the answer's own declaration stands at: a member, the top level, unknown.
        let levels: HashSet<bool> = self
            .declarations
            .iter()
            .filter(|d| seen.contains(&(d.path.clone(), d.line)))
            .map(|d| d.indented)
            .collect();
        let member = match (levels.contains(&true), levels.contains(&false)) {
            (true, false) => Some(true),
            (false, true) => Some(false),
            _ => None,
        };
        let kept: Vec<&Line> = self
            .found
            .iter()
            // A `.py` declaration is the server's to find; only stub and import lines count.
            .filter(|l| l.stub || !declares_line(l, &self.declarations))
            .filter(|l| match member {
                Some(true) => l.stub && l.indented,
                Some(false) => !(l.stub && l.indented),
                None => true,
            })
            .collect();
        // A `.py` file whose import of the name the answer does not hold: its uses too.
        let unlinked: HashSet<&PathBuf> = kept
            .iter()
            .filter(|l| !l.stub && !seen.contains(&(l.path.clone(), l.line)))
            .map(|l| &l.path)
            .collect();
        let uses = self.uses.iter().filter(|u| unlinked.contains(&u.path));
        kept.into_iter()
            .chain(uses)
            .map(|l| (l.path.clone(), l.line))
            .collect()
    }
}

/// The aliases an import line gives `word` (`word as other`).
fn aliased(code: &str, word: &str) -> Vec<String> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(word)
        .filter(|(at, _)| {
            !code[..*at].chars().next_back().is_some_and(is_word)
                && !code[at + word.len()..].chars().next().is_some_and(is_word)
        })
        .filter_map(|(at, _)| {
            let rest = code[at + word.len()..].trim_start().strip_prefix("as")?;
            if !rest.starts_with(char::is_whitespace) {
                return None;
            }
            let alias: String = rest
                .trim_start()
                .chars()
                .take_while(|c| is_word(*c))
                .collect();
            (!alias.is_empty()).then_some(alias)
        })
        .collect()
}

fn declares_line(l: &Line, declarations: &[Line]) -> bool {
    declarations
        .iter()
        .any(|d| d.path == l.path && d.line == l.line)
}

/// Of `places`, a stub line that declares `word` (a `def`, a `class`, an annotated or
/// assigned name), read with `read`: the line to ask from.
pub fn declaring(
    places: &[(PathBuf, u32)],
    word: &str,
    read: &dyn Fn(&Path) -> Option<String>,
) -> Option<(PathBuf, u32)> {
    places
        .iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e == "pyi"))
        .find(|(p, line)| {
            let text = read(p).unwrap_or_default();
            let code = text
                .lines()
                .nth((*line as usize).saturating_sub(1))
                .unwrap_or("")
                .trim_start();
            declares(code, word)
                || code
                    .strip_prefix(word)
                    .is_some_and(|r| r.trim_start().starts_with([':', '=']))
        })
        .cloned()
}

/// Where `text` imports `word` with `from MODULE import …` (also inside parentheses over
/// several lines): the 1-based line of the name and the module.
pub fn imported_at(text: &str, word: &str) -> Option<(u32, String)> {
    let mut module: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let code = raw.split('#').next().unwrap_or("");
        let trimmed = code.trim_start();
        let opening = trimmed
            .strip_prefix("from ")
            .and_then(|r| r.split_once(" import "));
        if let Some((m, names)) = opening {
            if has_word(names, word) {
                return Some((i as u32 + 1, m.trim().to_string()));
            }
            module = (names.contains('(') && !names.contains(')')).then(|| m.trim().to_string());
            continue;
        }
        if let Some(m) = &module {
            if has_word(code, word) {
                return Some((i as u32 + 1, m.clone()));
            }
            if code.contains(')') {
                module = None;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(files: &[(&str, &str)], word: &str, seen: &[(&str, u32)]) -> Vec<(String, u32)> {
        let mut h = PyHider::new(word, false);
        for (p, t) in files {
            h.file(Path::new(p), t);
        }
        let seen: HashSet<(PathBuf, u32)> =
            seen.iter().map(|(p, l)| (PathBuf::from(p), *l)).collect();
        let mut out: Vec<(String, u32)> = h
            .places(&seen)
            .into_iter()
            .filter(|p| !seen.contains(p))
            .map(|(p, l)| (p.display().to_string(), l))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn stub_lines_and_unlinked_imports_count_where_there_are_stubs() {
        let stub = "from ._make import fields_dict as fields_dict\n# fields_dict is here\ndef fields_dict(cls: type) -> dict: ...\ndef fields_dicts() -> None: ...\n";
        let imp = "from .recipes import (\n    take,\n    UnequalIterablesError,\n)\n__all__ = [\n    'UnequalIterablesError',\n]\nraise UnequalIterablesError()\n";
        let files = [
            ("a/__init__.pyi", stub),
            ("a/more.py", imp),
            (
                "a/recipes.py",
                "class UnequalIterablesError(ValueError):\n    pass\n",
            ),
        ];
        assert_eq!(
            places(&files, "fields_dict", &[]),
            vec![("a/__init__.pyi".into(), 1), ("a/__init__.pyi".into(), 3)]
        );
        // The import, the __all__ entry and the raise in the file whose import was not
        // linked; the class line is the declaration.
        assert_eq!(
            places(&files, "UnequalIterablesError", &[("a/recipes.py", 1)]),
            vec![
                ("a/more.py".into(), 3),
                ("a/more.py".into(), 6),
                ("a/more.py".into(), 8)
            ]
        );
        // Its import linked: the file's uses are the server's.
        assert!(
            places(
                &files,
                "UnequalIterablesError",
                &[("a/recipes.py", 1), ("a/more.py", 3), ("a/more.py", 6)]
            )
            .is_empty()
        );
        // No stub anywhere: pyright links imports itself.
        assert!(places(&files[1..], "UnequalIterablesError", &[]).is_empty());
    }

    #[test]
    fn doctest_lines_and_calls_through_an_alias_are_hidden_without_stubs() {
        let number = "def intword(value):\n    \"\"\"Words.\n\n    >>> intword(100)\n    '100'\n    >>> x = [\n    ...     intword(1)]\n    \"\"\"\n    return value\n";
        let i18n = "def _gettext(message):\n    return message\n";
        let time = "from .i18n import _gettext as _\nfrom .i18n import (\n    other,\n    _gettext as tr,\n)\n\nfor _ in range(3):\n    pass\nA = _(\"a\")\nB = tr(\"b\")\n";
        let files = [("number.py", number), ("i18n.py", i18n), ("time.py", time)];
        assert_eq!(
            places(&files, "intword", &[("number.py", 1)]),
            vec![("number.py".to_string(), 4), ("number.py".to_string(), 7)]
        );
        assert_eq!(
            places(
                &files,
                "_gettext",
                &[("i18n.py", 1), ("time.py", 1), ("time.py", 4)]
            ),
            vec![("time.py".to_string(), 9), ("time.py".to_string(), 10)],
            "`for _ in` is not a use of the alias `_`"
        );
        assert_eq!(aliased("from m import a as b, c as d", "c"), vec!["d"]);
        assert!(aliased("from m import a_as_b", "a").is_empty());
    }

    #[test]
    fn a_member_is_not_a_module_function_of_the_same_name() {
        let files = [
            (
                "m/more.pyi",
                "class peekable:\n    def prepend(self, *items) -> None: ...\n",
            ),
            ("m/recipes.pyi", "def prepend(value, iterator): ...\n"),
            (
                "m/more.py",
                "class peekable:\n    def prepend(self, *items):\n        pass\n",
            ),
        ];
        // Asked from the member's .py definition: the member's stub line, not the function.
        assert_eq!(
            places(&files, "prepend", &[("m/more.py", 2)]),
            vec![("m/more.pyi".into(), 2)]
        );
        // The answer holds the stub's member line: nothing left.
        assert!(places(&files, "prepend", &[("m/more.py", 2), ("m/more.pyi", 2)]).is_empty());
    }

    #[test]
    fn an_import_of_the_name_is_found_also_in_parentheses() {
        let text = "import os\nfrom .recipes import take\nfrom .recipes import (\n    _marker,\n    _zip_equal,\n)\n";
        assert_eq!(
            imported_at(text, "_zip_equal"),
            Some((5, ".recipes".into()))
        );
        assert_eq!(imported_at(text, "take"), Some((2, ".recipes".into())));
        assert_eq!(imported_at(text, "os"), None);
    }

    #[test]
    fn the_line_to_ask_from_declares_the_name() {
        let dir = tempfile::tempdir().unwrap();
        let stub = dir.path().join("a.pyi");
        std::fs::write(&stub, "from x import f as f\ndef f() -> int: ...\n").unwrap();
        let places = vec![(stub.clone(), 1), (stub.clone(), 2)];
        let read = |p: &Path| std::fs::read_to_string(p).ok();
        assert_eq!(declaring(&places, "f", &read), Some((stub, 2)));
    }
}

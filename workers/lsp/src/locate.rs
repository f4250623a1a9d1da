//! The start rule: a server starts only where BOTH its root marker exists (walking up from
//! the file) AND its binary resolves (project-local `node_modules/.bin`, `.venv/bin`,
//! `venv/bin` first, then the configured search path, then `$PATH`). Each half says exactly
//! what it looked for and where when it fails.
//!
//! Project-local binaries are searched in a trusted root only: in an untrusted root a binary inside
//! the project is project code and never runs (`crate::trust`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::config::LanguageSpec;

/// Which language covers `path`, by extension.
pub fn language_of<'a>(
    languages: &'a std::collections::BTreeMap<String, LanguageSpec>,
    path: &Path,
) -> Option<(&'a str, &'a LanguageSpec)> {
    let ext = path.extension()?.to_str()?;
    languages
        .iter()
        .find(|(_, spec)| spec.extensions.iter().any(|e| e == ext))
        .map(|(name, spec)| (name.as_str(), spec))
}

/// Markers that make a root only where no directory above holds another marker of the
/// language: a `requirements.txt` lists what a directory's scripts or tests install, as
/// packaging 24.1's `tests/requirements.txt` does, and a root there resolved `import
/// packaging` to the installed copy, not the project's `src/` above it.
const WEAK_MARKERS: &[&str] = &["requirements.txt"];

/// Directories above a root of weak markers searched for a root of others, at most.
const ABOVE_WEAK_MAX: usize = 3;

/// The nearest directory at or above `start` holding one of `markers`; one that holds only
/// weak markers ([`WEAK_MARKERS`]) gives way to a directory at most [`ABOVE_WEAK_MAX`] above
/// it holding another.
pub fn find_root(start: &Path, markers: &[String]) -> Option<PathBuf> {
    let start = if start.is_dir() {
        start
    } else {
        start.parent()?
    };
    let strong = |d: &Path| {
        markers
            .iter()
            .any(|m| !WEAK_MARKERS.contains(&m.as_str()) && d.join(m).exists())
    };
    let found = start
        .ancestors()
        .find(|d| markers.iter().any(|m| d.join(m).exists()))?;
    if strong(found) {
        return Some(found.to_path_buf());
    }
    let above = found
        .ancestors()
        .skip(1)
        .take(ABOVE_WEAK_MAX)
        .find(|d| strong(d));
    Some(above.unwrap_or(found).to_path_buf())
}

/// A server binary that resolved, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    /// The command as configured (program first).
    pub command: Vec<String>,
    /// The absolute program path found.
    pub program: PathBuf,
}

/// Why no candidate binary resolved: what was looked for, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct NotFound {
    pub looked_for: Vec<String>,
    pub searched: Vec<String>,
}

impl std::fmt::Display for NotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "binary not found: looked for {} in {}",
            self.looked_for
                .iter()
                .map(|b| format!("`{b}`"))
                .collect::<Vec<_>>()
                .join(", "),
            self.searched.join(", ")
        )
    }
}

/// The project-local binary directories, searched first in a trusted root only.
pub const LOCAL_DIRS: [&str; 3] = ["node_modules/.bin", ".venv/bin", "venv/bin"];

/// The directories searched for a server binary, in order: project-local ones first when
/// `local` (the root is trusted: a binary inside the project is project code).
pub fn search_dirs(root: &Path, extra: &[String], path_var: &str, local: bool) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if local {
        dirs.extend(LOCAL_DIRS.iter().map(|d| root.join(d)));
    }
    dirs.extend(extra.iter().map(PathBuf::from));
    dirs.extend(
        path_var
            .split(':')
            .filter(|d| !d.is_empty())
            .map(PathBuf::from),
    );
    dirs
}

/// The first candidate command whose program resolves. `local`: whether project-local
/// binaries (and programs named by a path relative to the root) may run — only in a trusted
/// root.
pub fn resolve_binary(
    spec: &LanguageSpec,
    root: &Path,
    extra: &[String],
    path_var: &str,
    local: bool,
) -> Result<Resolved, NotFound> {
    let dirs = search_dirs(root, extra, path_var, local);
    for command in &spec.servers {
        let Some(program) = command.first() else {
            continue;
        };
        if program.contains('/') {
            if !local && !Path::new(program).is_absolute() {
                continue;
            }
            let p = root.join(program);
            if is_executable(&p) {
                return Ok(Resolved {
                    command: command.clone(),
                    program: p,
                });
            }
            continue;
        }
        for dir in &dirs {
            let p = dir.join(program);
            if is_executable(&p) {
                return Ok(Resolved {
                    command: command.clone(),
                    program: p,
                });
            }
        }
    }
    let mut searched: Vec<String> = dirs
        .iter()
        .take(if local { LOCAL_DIRS.len() } else { 0 } + extra.len())
        .map(|d| d.display().to_string())
        .collect();
    if !local {
        searched.insert(
            0,
            format!(
                "(not {}: the root is untrusted)",
                LOCAL_DIRS
                    .iter()
                    .map(|d| root.join(d).display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    searched.push(format!("$PATH ({path_var})"));
    Err(NotFound {
        looked_for: spec
            .servers
            .iter()
            .filter_map(|c| c.first().cloned())
            .collect(),
        searched,
    })
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requirements_file_below_a_project_is_no_root_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("tests/unit")).unwrap();
        std::fs::create_dir_all(root.join("tools")).unwrap();
        std::fs::write(root.join("pyproject.toml"), "").unwrap();
        std::fs::write(root.join("tests/requirements.txt"), "pytest\n").unwrap();
        std::fs::write(root.join("tools/requirements.txt"), "").unwrap();
        std::fs::write(root.join("tools/pyproject.toml"), "").unwrap();
        let markers: Vec<String> = ["pyproject.toml", "requirements.txt"]
            .iter()
            .map(|m| m.to_string())
            .collect();
        let at = |p: &str| find_root(&root.join(p), &markers).unwrap();
        assert_eq!(at("tests/unit"), root, "packaging's tests/requirements.txt");
        assert_eq!(at("tools"), root.join("tools"), "a project of its own");
        // Alone, a requirements file makes the root.
        let lone = tempfile::tempdir().unwrap();
        std::fs::write(lone.path().join("requirements.txt"), "").unwrap();
        assert_eq!(find_root(lone.path(), &markers).unwrap(), lone.path());
    }
    use crate::config::default_languages;

    #[test]
    fn root_is_the_nearest_marker_and_local_binaries_win() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("proj");
        std::fs::create_dir_all(root.join("pkg/sub")).unwrap();
        std::fs::write(root.join("pyproject.toml"), "").unwrap();
        let langs = default_languages();
        let file = root.join("pkg/sub/m.py");
        let (name, spec) = language_of(&langs, &file).unwrap();
        assert_eq!(name, "python");
        assert_eq!(
            find_root(&file, &spec.markers).as_deref(),
            Some(root.as_path())
        );
        assert_eq!(find_root(tmp.path(), &["no-such-marker".into()]), None);

        let err = resolve_binary(spec, &root, &[], "/nonexistent", true).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("`pyright-langserver`, `pylsp`"), "{text}");
        assert!(text.contains("node_modules/.bin"), "{text}");
        assert!(text.contains("$PATH (/nonexistent)"), "{text}");

        let bin = root.join(".venv/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("pylsp"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(bin.join("pylsp"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let found = resolve_binary(spec, &root, &[], "/nonexistent", true).unwrap();
        assert_eq!(found.program, bin.join("pylsp"));
        assert_eq!(found.command, vec!["pylsp".to_string()]);

        // In an untrusted root the project's own binaries are project code: never run.
        let err = resolve_binary(spec, &root, &[], "/nonexistent", false).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("the root is untrusted"), "{text}");
        let relative = LanguageSpec {
            servers: vec![vec!["./tools/server".into()]],
            ..spec.clone()
        };
        std::fs::create_dir_all(root.join("tools")).unwrap();
        std::fs::copy(bin.join("pylsp"), root.join("tools/server")).unwrap();
        assert!(resolve_binary(&relative, &root, &[], "/nonexistent", true).is_ok());
        assert!(resolve_binary(&relative, &root, &[], "/nonexistent", false).is_err());
    }
}

//! Which adapter debugs a program, and which binary runs it: project roots by marker,
//! binaries project-local first (`.venv/bin`, `venv/bin`), then `[debug] search_path`, then
//! `$PATH`; numbered LLVM binaries (`lldb-dap-19`); and debugpy's interpreter, which is the
//! project's own virtualenv before any `python3` on the path, so the debuggee sees the
//! project's packages.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::config::{AdapterSpec, Transport};

/// Launch conventions an adapter follows; taken from its registry name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Debugpy,
    Lldb,
    Delve,
    Dart,
    Generic,
}

impl Flavor {
    pub fn of(name: &str) -> Flavor {
        match name {
            "debugpy" => Flavor::Debugpy,
            "lldb" => Flavor::Lldb,
            "delve" => Flavor::Delve,
            "dart" => Flavor::Dart,
            _ => Flavor::Generic,
        }
    }
}

/// Where binaries are looked for, in order.
#[derive(Clone, Debug)]
pub struct Search {
    /// The project's root (nearest directory with a marker) or the workdir.
    pub project: PathBuf,
    pub workdir: PathBuf,
    /// `[debug] search_path`.
    pub extra: Vec<String>,
    /// The children's `PATH`.
    pub path_var: String,
    /// `[debug] python`.
    pub python: Option<String>,
}

impl Search {
    /// The directories, in search order, without duplicates.
    pub fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for base in [&self.project, &self.workdir] {
            dirs.push(base.join(".venv/bin"));
            dirs.push(base.join("venv/bin"));
        }
        for d in &self.extra {
            dirs.push(self.workdir.join(d));
        }
        dirs.extend(
            self.path_var
                .split(':')
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
        );
        let mut seen = std::collections::HashSet::new();
        dirs.retain(|d| seen.insert(d.clone()));
        dirs
    }

    fn describe(&self) -> String {
        let dirs: Vec<String> = self
            .dirs()
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        dirs.join(":")
    }
}

/// A runnable adapter command.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub name: String,
    pub flavor: Flavor,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// debugpy: the interpreter that runs the adapter and the debuggee.
    pub python: Option<PathBuf>,
    /// Variables added to the launcher's environment (a virtualenv's `PATH`, `VIRTUAL_ENV`).
    pub env: Vec<(String, String)>,
    pub transport: Transport,
}

impl Resolved {
    /// The command line, for messages.
    pub fn command_line(&self) -> String {
        std::iter::once(self.program.display().to_string())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The first executable `name` in `dirs`; `name-*` matches the highest numbered `name-NN`
/// in the first directory that has one.
fn find_in(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    if let Some(prefix) = name.strip_suffix("-*") {
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let best = entries
                .flatten()
                .filter_map(|e| {
                    let file = e.file_name().into_string().ok()?;
                    let number: u32 = file.strip_prefix(prefix)?.strip_prefix('-')?.parse().ok()?;
                    is_executable(&e.path()).then_some((number, e.path()))
                })
                .max_by_key(|(n, _)| *n);
            if let Some((_, path)) = best {
                return Some(path);
            }
        }
        return None;
    }
    dirs.iter().map(|d| d.join(name)).find(|p| is_executable(p))
}

/// The nearest directory from `from` (a file's directory, or a directory) upwards that holds
/// one of `markers`.
pub fn find_root(from: &Path, markers: &[String]) -> Option<PathBuf> {
    let start = if from.is_dir() { from } else { from.parent()? };
    start
        .ancestors()
        .find(|dir| markers.iter().any(|m| dir.join(m).exists()))
        .map(Path::to_path_buf)
}

/// debugpy's interpreter: `[debug] python`, else the project's `.venv/bin/python` or
/// `venv/bin/python` (project root, then workdir), else `python3` on the search path.
pub fn python(search: &Search) -> Result<PathBuf, String> {
    if let Some(configured) = search.python.as_deref().filter(|p| !p.is_empty()) {
        if configured.contains('/') {
            let p = search.workdir.join(configured);
            return if is_executable(&p) {
                Ok(p)
            } else {
                Err(format!(
                    "the configured `[debug] python` {} is not an executable file",
                    p.display()
                ))
            };
        }
        return find_in(configured, &search.dirs()).ok_or_else(|| {
            format!(
                "the configured `[debug] python` {configured:?} is not on the search path ({})",
                search.describe()
            )
        });
    }
    for base in [&search.project, &search.workdir] {
        for venv in [".venv/bin/python", "venv/bin/python"] {
            let p = base.join(venv);
            if is_executable(&p) {
                return Ok(p);
            }
        }
    }
    let dirs: Vec<PathBuf> = search.dirs();
    find_in("python3", &dirs).ok_or_else(|| {
        format!(
            "binary not found: no .venv/bin/python or venv/bin/python in {}, and no python3 in {}",
            search.project.display(),
            search.describe()
        )
    })
}

/// `PATH` with `dir` first, and `VIRTUAL_ENV` when `dir` is a virtualenv's `bin`.
fn venv_env(path_var: &str, bin: &Path) -> Vec<(String, String)> {
    let dir = bin.display().to_string();
    let path = if path_var.is_empty() {
        dir
    } else {
        format!("{dir}:{path_var}")
    };
    let mut env = vec![("PATH".to_string(), path)];
    if let Some(root) = bin.parent()
        && root.join("pyvenv.cfg").exists()
    {
        env.push(("VIRTUAL_ENV".into(), root.display().to_string()));
    }
    env
}

/// The command that runs adapter `name` for `search`, or why there is none (the text starts
/// with "binary not found" when no candidate program exists).
pub fn resolve(name: &str, spec: &AdapterSpec, search: &Search) -> Result<Resolved, String> {
    let dirs = search.dirs();
    let mut tried = Vec::new();
    for command in &spec.commands {
        let Some(program) = command.first() else {
            continue;
        };
        let args: Vec<String> = command[1..].to_vec();
        if program == "{python}" {
            let python = python(search)?;
            let env = python
                .parent()
                .map(|bin| venv_env(&search.path_var, bin))
                .unwrap_or_default();
            return Ok(Resolved {
                name: name.to_string(),
                flavor: Flavor::of(name),
                program: python.clone(),
                args,
                python: Some(python),
                env,
                transport: spec.transport,
            });
        }
        let found = if program.contains('/') {
            let p = search.workdir.join(program);
            is_executable(&p).then_some(p)
        } else {
            find_in(program, &dirs)
        };
        match found {
            Some(program) => {
                return Ok(Resolved {
                    name: name.to_string(),
                    flavor: Flavor::of(name),
                    program,
                    args,
                    python: None,
                    env: Vec::new(),
                    transport: spec.transport,
                });
            }
            None => tried.push(program.replace("-*", "-NN")),
        }
    }
    Err(format!(
        "binary not found: {} (searched {})",
        tried.join(", "),
        search.describe()
    ))
}

/// Which adapter `launch` uses for `program`: by extension, or `native` adapters for ELF
/// executables.
pub fn pick<'a>(
    adapters: &'a std::collections::BTreeMap<String, AdapterSpec>,
    program: &Path,
) -> Option<(&'a String, &'a AdapterSpec)> {
    let ext = program
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_string();
    if !ext.is_empty()
        && let Some(found) = adapters.iter().find(|(_, s)| s.extensions.contains(&ext))
    {
        return Some(found);
    }
    if is_elf(program) {
        return adapters.iter().find(|(_, s)| s.native);
    }
    None
}

fn is_elf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::default_adapters;

    fn exe(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn search(project: &Path, path_var: &str) -> Search {
        Search {
            project: project.to_path_buf(),
            workdir: project.to_path_buf(),
            extra: Vec::new(),
            path_var: path_var.to_string(),
            python: None,
        }
    }

    #[test]
    fn numbered_llvm_binaries_resolve_to_the_highest() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        exe(&bin.join("lldb-dap-17"));
        exe(&bin.join("lldb-dap-19"));
        exe(&bin.join("lldb-dap-x"));
        let adapters = default_adapters();
        let s = search(dir.path(), &bin.display().to_string());
        let r = resolve("lldb", &adapters["lldb"], &s).unwrap();
        assert_eq!(r.program, bin.join("lldb-dap-19"));
        assert_eq!(r.flavor, Flavor::Lldb);
        exe(&bin.join("lldb-dap"));
        let r = resolve("lldb", &adapters["lldb"], &s).unwrap();
        assert_eq!(
            r.program,
            bin.join("lldb-dap"),
            "the unnumbered name comes first"
        );
        let e = resolve("delve", &adapters["delve"], &s).unwrap_err();
        assert!(e.starts_with("binary not found: dlv (searched "), "{e}");
    }

    #[test]
    fn debugpy_prefers_the_project_virtualenv() {
        let dir = tempfile::tempdir().unwrap();
        let system = dir.path().join("system");
        exe(&system.join("python3"));
        let project = dir.path().join("proj");
        std::fs::create_dir_all(&project).unwrap();
        let adapters = default_adapters();
        let s = search(&project, &system.display().to_string());
        let r = resolve("debugpy", &adapters["debugpy"], &s).unwrap();
        assert_eq!(r.program, system.join("python3"));
        assert_eq!(r.args, ["-m", "debugpy.adapter"]);
        exe(&project.join("venv/bin/python"));
        assert_eq!(python(&s).unwrap(), project.join("venv/bin/python"));
        exe(&project.join(".venv/bin/python"));
        std::fs::write(project.join(".venv/pyvenv.cfg"), "").unwrap();
        let r = resolve("debugpy", &adapters["debugpy"], &s).unwrap();
        assert_eq!(
            r.python.as_deref(),
            Some(project.join(".venv/bin/python").as_path())
        );
        assert!(
            r.env
                .iter()
                .any(|(k, v)| k == "VIRTUAL_ENV" && v.ends_with(".venv"))
        );
        assert!(
            r.env.iter().any(|(k, v)| k == "PATH"
                && v.starts_with(&project.join(".venv/bin").display().to_string()))
        );
    }

    #[test]
    fn launch_picks_by_extension_or_elf() {
        let dir = tempfile::tempdir().unwrap();
        let adapters = default_adapters();
        let py = dir.path().join("a.py");
        std::fs::write(&py, "").unwrap();
        assert_eq!(pick(&adapters, &py).unwrap().0, "debugpy");
        let elf = dir.path().join("prog");
        std::fs::write(&elf, b"\x7fELF\x02\x01").unwrap();
        assert_eq!(pick(&adapters, &elf).unwrap().0, "lldb");
        let text = dir.path().join("notes");
        std::fs::write(&text, "hello").unwrap();
        assert!(pick(&adapters, &text).is_none());
    }

    #[test]
    fn roots_are_found_upwards() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pyproject.toml"), "").unwrap();
        let deep = dir.path().join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        let markers = vec!["pyproject.toml".to_string()];
        assert_eq!(find_root(&deep, &markers).unwrap(), dir.path());
        assert!(find_root(&deep, &["go.mod".to_string()]).is_none());
    }
}

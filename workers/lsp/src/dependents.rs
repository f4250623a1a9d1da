//! The files a write may break besides the written ones: diagnostics of dependents, folded
//! into a write's result like the written files' own, at most [`DEPENDENTS_MAX`] files.
//!
//! Where the server publishes diagnostics for files it was not asked about (rust-analyzer's
//! `cargo check` covers the whole crate), the dependents are the other files it published
//! for after the write. The other servers check only the files open in them, so the files
//! that import a written one are found by their import lines naming it (`from pkg.core
//! import`, `import … "./core"`, `#include "core.h"`, `use crate::core`; a bounded walk of the
//! root, at most [`SCAN_FILES_MAX`] files) and asked for their diagnostics. Before the write
//! their diagnostics become the run's baseline, as the written files' do, so only what the
//! write introduced is reported. The ledger's work is [`Diagnostics`]'; finding the servers and
//! importers of the written files is [`Servers`]'.

use futures_util::StreamExt;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::answers::Diag;
use crate::diagnostics::Diagnostics;
use crate::lock;
use crate::position::Encoding;
use crate::server::{ServerShared, read_doc, root_scope};
use crate::servers::Servers;
use crate::uri;
use crate::watch::skipped;

/// Dependent files checked per write at most.
pub const DEPENDENTS_MAX: usize = 20;
/// Files read per search for importers at most.
pub const SCAN_FILES_MAX: usize = 5_000;
/// Larger files are not read for imports.
const FILE_BYTES_MAX: u64 = 1 << 20;

/// The importers found for some written files.
#[derive(Debug, Default)]
pub struct Importers {
    pub files: Vec<PathBuf>,
    /// Whether the search stopped early (the file cap or [`DEPENDENTS_MAX`] importers).
    pub cut: bool,
    /// How many of `files` import a written file only through other files.
    pub indirect: usize,
}

/// The name other files use to import `path`: a header by its file name, a package's
/// `__init__.py`/`index.ts`/`mod.rs` by its directory, any other module by its stem; `None`
/// for a C/C++ source file (nothing includes it).
pub fn import_name(path: &Path) -> Option<String> {
    let ext = path.extension()?.to_str()?;
    let file = path.file_name()?.to_str()?;
    if ext == "go" {
        // Go imports a package by its path: the module's (go.mod's `module` line) for its
        // root directory, else ending in the directory's name.
        let dir = path.parent()?;
        let module = std::fs::read_to_string(dir.join("go.mod"))
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.trim().strip_prefix("module "))
                    .and_then(|m| {
                        m.trim()
                            .trim_matches('"')
                            .rsplit('/')
                            .next()
                            .map(str::to_string)
                    })
            });
        return module.or_else(|| dir.file_name()?.to_str().map(str::to_string));
    }
    if matches!(ext, "h" | "hh" | "hpp" | "hxx") {
        return Some(file.to_string());
    }
    if matches!(ext, "c" | "cc" | "cpp" | "cxx") {
        return None;
    }
    let stem = path.file_stem()?.to_str()?;
    if matches!(stem, "__init__" | "index" | "mod") {
        return path.parent()?.file_name()?.to_str().map(str::to_string);
    }
    Some(stem.to_string())
}

/// The import statements of `text`, each on one line: a statement whose brackets stay open
/// takes the lines up to where they close (Python's `from pkg import (\n  core,\n)`,
/// TypeScript's `import {\n  a,\n} from './core'`, Go's `import (\n\t"m/core"\n)`), at
/// most [`STATEMENT_LINES_MAX`] lines; every other line stands as it is.
fn statements(text: &str) -> Vec<String> {
    // Brackets a line opens, less those it closes.
    let open =
        |l: &str| l.matches(['(', '{']).count() as i64 - l.matches([')', '}']).count() as i64;
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut depth = open(line);
        let t = line.trim_start();
        let starts = ["import", "from ", "export ", "use ", "pub use "]
            .iter()
            .any(|k| t.starts_with(k));
        if !starts || depth <= 0 {
            out.push(line.to_string());
            continue;
        }
        let mut joined = line.to_string();
        for _ in 0..STATEMENT_LINES_MAX {
            let Some(next) = lines.next() else { break };
            joined.push(' ');
            joined.push_str(next.trim());
            depth += open(next);
            if depth <= 0 {
                break;
            }
        }
        out.push(joined);
    }
    out
}

/// Lines one import statement takes at most ([`statements`]).
const STATEMENT_LINES_MAX: usize = 200;

/// Whether `line` is an import statement (`import`, `from`, `#include`, `use`, `mod`,
/// `export … from`, `require(`, `import(`).
fn is_import(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("import ")
        || t.starts_with("from ")
        || t.starts_with("#include")
        || t.starts_with("use ")
        || t.starts_with("pub use ")
        || t.starts_with("mod ")
        || t.starts_with("export ")
        || line.contains("require(")
        || line.contains("import(")
}

/// Whether `line` is an import line naming `name` as a whole word.
fn imports(line: &str, name: &str) -> bool {
    if !is_import(line) {
        return false;
    }
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$');
    line.match_indices(name).any(|(i, _)| {
        !is_word(line[..i].chars().next_back()) && !is_word(line[i + name.len()..].chars().next())
    })
}

/// Extensions a relative JavaScript/TypeScript module specifier may leave out.
const SCRIPT_EXTENSIONS: [&str; 8] = ["ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs"];

/// Whether the import statement `line` of the script `from` names `target` by a relative
/// specifier (`'./core'`, `'../core.js'` for core.ts, `'./'` or `'.'` for index.ts): what a
/// barrel's importers write, which names no file.
fn imports_relative(line: &str, from: &Path, target: &Path) -> bool {
    let Some(dir) = from.parent() else {
        return false;
    };
    line.split(['\'', '"', '`'])
        .skip(1)
        .step_by(2)
        .filter(|spec| {
            matches!(*spec, "." | "..") || spec.starts_with("./") || spec.starts_with("../")
        })
        .any(|spec| {
            let base = lexical(&dir.join(spec));
            if base == target {
                return true;
            }
            let file = |p: &Path| {
                SCRIPT_EXTENSIONS.iter().any(|x| {
                    let mut with = p.as_os_str().to_owned();
                    with.push(format!(".{x}"));
                    Path::new(&with) == target || p.join(format!("index.{x}")) == target
                })
            };
            // `./core.js` names core.ts in TypeScript's ESM style.
            let scripted = base
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| SCRIPT_EXTENSIONS.contains(&x));
            file(&base) || (scripted && file(&base.with_extension("")))
        })
}

/// `path` with `.` and `..` taken away lexically (no file system).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Each regular file under `root` whose extension is one of `extensions`, depth-first with
/// each directory's entries in name order, leaving out the directories `skip_dir` names and
/// not following symbolic links; `visit` may stop the walk. Unreadable directories are passed
/// over. Blocking: the project walk of [`importers`] and of `hidden_uses::scan`.
pub(crate) fn each_source_file(
    root: &Path,
    extensions: &[String],
    skip_dir: fn(&str) -> bool,
    mut visit: impl FnMut(&std::fs::DirEntry) -> ControlFlow<()>,
) {
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let Ok(kind) = e.file_type() else { continue };
            let name = e.file_name();
            if kind.is_dir() {
                if !skip_dir(&name.to_string_lossy()) {
                    dirs.push(e.path());
                }
                continue;
            }
            let ours = Path::new(&name)
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| extensions.iter().any(|e| e == x));
            if kind.is_file() && ours && visit(&e).is_break() {
                return;
            }
        }
    }
}

/// The files under `root` with one of `extensions` that import one of `written` (those
/// excluded), directly or through files that do (an importer of an importer: TypeScript's
/// `queryObserver.ts` reaches `queryCache.ts` through `queryClient.ts`, a barrel's importers
/// reach the module it re-exports), nearest first, at most [`DEPENDENTS_MAX`], reading at
/// most [`SCAN_FILES_MAX`] files (hidden directories, `node_modules`, `__pycache__`,
/// `target` skipped; symbolic links not followed). Blocking.
pub fn importers(root: &Path, written: &[PathBuf], extensions: &[String]) -> Importers {
    let mut found = Importers::default();
    // One walk: each file's import statements (only those), for every level of the search.
    let mut sources: Vec<(PathBuf, Vec<String>)> = Vec::new();
    each_source_file(root, extensions, skipped, |e| {
        if sources.len() >= SCAN_FILES_MAX {
            found.cut = true;
            return ControlFlow::Break(());
        }
        let path = e.path();
        if written.contains(&path) || e.metadata().is_ok_and(|m| m.len() > FILE_BYTES_MAX) {
            return ControlFlow::Continue(());
        }
        let text = toolvisor_kit::special::read_to_string(&path).unwrap_or_default();
        let lines = statements(&text)
            .into_iter()
            .filter(|l| is_import(l))
            .collect();
        sources.push((path, lines));
        ControlFlow::Continue(())
    });
    let mut taken = vec![false; sources.len()];
    let mut level: Vec<PathBuf> = written.to_vec();
    let mut first = true;
    while !level.is_empty() && !found.cut {
        let names: Vec<String> = level.iter().filter_map(|p| import_name(p)).collect();
        let mut next = Vec::new();
        for (i, (path, lines)) in sources.iter().enumerate() {
            if taken[i] {
                continue;
            }
            // A Go file shares its package's names with every file of its directory: it
            // depends on the written file without importing it.
            let same_package = first
                && path.extension().is_some_and(|x| x == "go")
                && level.iter().any(|w| {
                    w.extension().is_some_and(|x| x == "go") && w.parent() == path.parent()
                });
            let script = path
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| SCRIPT_EXTENSIONS.contains(&x));
            let imports_one = lines.iter().any(|l| {
                names.iter().any(|n| imports(l, n))
                    || (script && level.iter().any(|t| imports_relative(l, path, t)))
            });
            if !(same_package || imports_one) {
                continue;
            }
            if found.files.len() >= DEPENDENTS_MAX {
                found.cut = true;
                break;
            }
            taken[i] = true;
            found.files.push(path.clone());
            if !first {
                found.indirect += 1;
            }
            next.push(path.clone());
        }
        level = next;
        first = false;
    }
    found
}

/// What the dependents of a write showed.
#[derive(Default)]
pub struct DependentsReport {
    /// Files checked (their new diagnostics are folded into the write's).
    pub checked: Vec<PathBuf>,
    pub new: Vec<Diag>,
    /// One line per server saying what was checked and why, with the cap.
    pub lines: Vec<String>,
}

impl Servers {
    /// The files to check besides `paths` for `shared`: where it publishes for files it was
    /// not asked about, none (they come as publishes); else the importers of `paths`.
    async fn importers_of(&self, shared: &ServerShared, paths: &[PathBuf]) -> Importers {
        if shared.checks_on_save() {
            return Importers::default();
        }
        let extensions = self
            .languages()
            .get(&shared.language)
            .map(|s| s.extensions.clone())
            .unwrap_or_default();
        let (root, written) = (shared.root.clone(), paths.to_vec());
        tokio::task::spawn_blocking(move || importers(&root, &written, &extensions))
            .await
            .unwrap_or_default()
    }

    /// The servers of `paths` for `run`, each with the written paths it covers.
    fn servers_of(&self, run: &str, paths: &[PathBuf]) -> Vec<(Arc<ServerShared>, Vec<PathBuf>)> {
        let mut out: Vec<(Arc<ServerShared>, Vec<PathBuf>)> = Vec::new();
        for p in paths {
            let Ok(plan) = self.plan(p, run) else {
                continue;
            };
            let shared = self.shared(&plan);
            match out.iter_mut().find(|(s, _)| Arc::ptr_eq(s, &shared)) {
                Some((_, ps)) => ps.push(p.clone()),
                None => out.push((shared, vec![p.clone()])),
            }
        }
        out
    }
}

impl Diagnostics {
    /// Before a write: the diagnostics the dependents of `paths` have now become `run`'s
    /// baseline where it holds none (as the written files' do), all within `wait`.
    pub(crate) async fn dependents_before(
        &self,
        servers: &Servers,
        run: &str,
        paths: &[PathBuf],
        wait: Duration,
    ) {
        let work = async {
            for (shared, written) in servers.servers_of(run, paths) {
                if shared.checks_on_save() {
                    // What it published so far (its last check) is where the run stands.
                    let published: Vec<(String, Vec<Value>)> = lock(&shared.diags.published)
                        .iter()
                        .map(|(u, p)| (u.clone(), p.items.clone()))
                        .collect();
                    for (u, items) in published {
                        let Some(path) = uri::to_path(&u) else {
                            continue;
                        };
                        // Its last check stands for every file it published for: an entry
                        // from before an outside change (a `git checkout`) would hide what
                        // comes back.
                        if written.contains(&path) {
                            continue;
                        }
                        let diags = published_diags(&shared, &path, &items);
                        self.ledger().fold(run, &path, &marks(&diags));
                    }
                    continue;
                }
                let found = servers.importers_of(&shared, &written).await;
                let baselines: Vec<_> = found
                    .files
                    .iter()
                    .filter(|d| !self.ledger().knows(run, d))
                    .map(|dep| self.baseline(servers, run, dep, wait))
                    .collect();
                futures_util::stream::iter(baselines)
                    .buffer_unordered(servers.config.dependents_at_once.max(1))
                    .collect::<()>()
                    .await;
            }
        };
        if tokio::time::timeout(wait, work).await.is_err() {
            tracing::info!("dependents' diagnostics baseline cut short: timed out");
        }
    }

    /// After a write: the dependents' diagnostics new for `run` (see the module doc), each
    /// `(shared, seq)` a server of the write with its diagnostics sequence number before the
    /// write's sync; at most [`DEPENDENTS_MAX`] files, within `wait`.
    pub(crate) async fn dependents_after(
        &self,
        servers: &Servers,
        run: &str,
        paths: &[PathBuf],
        involved: &[(Arc<ServerShared>, u64)],
        wait: Duration,
    ) -> DependentsReport {
        let mut report = DependentsReport::default();
        let deadline = tokio::time::Instant::now() + wait;
        for (shared, seq_before) in involved {
            let written: Vec<PathBuf> = paths.to_vec();
            if shared.checks_on_save() {
                let mut published: Vec<(u64, PathBuf, Vec<Value>)> = lock(&shared.diags.published)
                    .iter()
                    .filter(|(_, p)| p.seq > *seq_before)
                    .filter_map(|(u, p)| Some((p.seq, uri::to_path(u)?, p.items.clone())))
                    .filter(|(_, p, _)| !written.contains(p))
                    .collect();
                published.sort_by(|a, b| a.1.cmp(&b.1));
                let total = published.len();
                for (_, path, items) in published.into_iter().take(DEPENDENTS_MAX) {
                    let diags = published_diags(shared, &path, &items);
                    self.fold_dependent(run, &path, diags, &mut report);
                }
                if total > 0 {
                    report.lines.push(format!(
                        "(also checked {} other files {} published diagnostics for after the write; at most {DEPENDENTS_MAX}{})",
                        total.min(DEPENDENTS_MAX),
                        shared.id,
                        if total > DEPENDENTS_MAX {
                            format!(", of {total}")
                        } else {
                            String::new()
                        }
                    ));
                }
                continue;
            }
            let mut found = servers.importers_of(shared, &written).await;
            // A file two servers of the write both reach (nested roots) is checked once.
            found.files.retain(|f| !report.checked.contains(f));
            if found.files.is_empty() {
                continue;
            }
            let mut checked = 0;
            // A few at once (`[lsp] dependents_at_once`).
            // (Collected first: a stream holding the closure would not be `Send` for every
            // lifetime, as the handlers' futures must be.)
            let checks: Vec<_> = found
                .files
                .iter()
                .map(|dep| async move {
                    tokio::time::timeout_at(deadline, async {
                        let mut opened = servers.open(dep, run).await?;
                        servers.file_diagnostics(&mut opened).await
                    })
                    .await
                })
                .collect();
            let results: Vec<_> = futures_util::stream::iter(checks)
                .buffered(servers.config.dependents_at_once.max(1))
                .collect()
                .await;
            for (dep, got) in found.files.iter().zip(results) {
                match got {
                    Ok(Ok(diags)) => {
                        checked += 1;
                        self.fold_dependent(run, dep, diags, &mut report);
                    }
                    Ok(Err(e)) => {
                        tracing::info!(path = %dep.display(), error = %e.message, "a dependent's diagnostics")
                    }
                    Err(_) => break,
                }
            }
            // The files checked are in the answer's `dependents.checked`; the text counts them.
            let has_checker = servers
                .languages()
                .get(&shared.language)
                .is_some_and(|l| l.checker.is_some());
            report
                .lines
                .push(importers_line(&found, checked, has_checker));
        }
        report
    }

    fn fold_dependent(
        &self,
        run: &str,
        path: &Path,
        diags: Vec<Diag>,
        report: &mut DependentsReport,
    ) {
        let diags: Vec<Diag> = diags.into_iter().filter(|d| d.severity != 4).collect();
        let fresh = self.ledger().fold(run, path, &marks(&diags));
        report.checked.push(path.to_path_buf());
        for i in fresh {
            report.new.push(diags[i].clone());
        }
    }
}

/// The write's line about the importers of what it wrote: how many were checked, how many
/// only through other files, and where the search stopped (the files themselves are the
/// answer's `dependents.checked`).
fn importers_line(found: &Importers, checked: usize, has_checker: bool) -> String {
    let n = found.files.len();
    let through = match found.indirect {
        0 => String::new(),
        k => format!(", {k} indirectly"),
    };
    let files = if n == 1 { "file" } else { "files" };
    let mut line = match checked == n {
        true if !found.cut => return format!("(also checked the {n} importing {files}{through})"),
        true => format!("(also checked {n} importing {files}{through}"),
        false => format!("(also checked {checked} of the {n} importing {files}{through}"),
    };
    if found.cut && has_checker {
        line.push_str("; for the rest: `lsp diagnostics` file \"*\"");
    } else if found.cut {
        line.push_str(&format!("; at most {DEPENDENTS_MAX} are looked at"));
    }
    line.push(')');
    line
}

fn marks(diags: &[Diag]) -> Vec<crate::ledger::Mark> {
    diags
        .iter()
        .filter(|d| d.severity != 4)
        .map(Diag::mark)
        .collect()
}

/// The diagnostics a server published for `path`, their columns converted with the file's
/// text as the server's root holds it (read beneath the root).
fn published_diags(shared: &ServerShared, path: &Path, items: &[Value]) -> Vec<Diag> {
    let text = root_scope(&shared.root)
        .and_then(|scope| read_doc(&scope, path))
        .unwrap_or_default();
    let enc = shared.conn().map_or(Encoding::Utf16, |c| c.encoding);
    let mut diags: Vec<Diag> = items
        .iter()
        .map(|v| Diag::from_lsp(path, v, &text, enc))
        .collect();
    diags.sort_by_key(|d| (d.line, d.column));
    diags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_lines_are_found_by_the_written_files_name() {
        assert_eq!(
            import_name(Path::new("/r/pkg/core.py")).as_deref(),
            Some("core")
        );
        assert_eq!(
            import_name(Path::new("/r/pkg/__init__.py")).as_deref(),
            Some("pkg")
        );
        assert_eq!(
            import_name(Path::new("/r/util.h")).as_deref(),
            Some("util.h")
        );
        assert_eq!(import_name(Path::new("/r/util.c")), None);
        assert!(imports("from pkg.core import enlist", "core"));
        assert!(imports("import { enlist } from \"./core\";", "core"));
        assert!(imports("#include \"core.h\"", "core.h"));
        assert!(imports("use crate::core::enlist;", "core"));
        assert!(!imports("from pkg.core_utils import x", "core"));
        assert!(!imports("x = core(1)", "core"), "not an import line");
        // Statements over several lines, as they are written (marshmallow, neverthrow, Go).
        let text = "from marshmallow import (\n    fields,\n    validate,\n)\nimport {\n  combine,\n  other,\n} from './_internals/utils'\nimport (\n\t\"fmt\"\n\t\"example.com/m/core\"\n)\nx = validate(1)\n";
        let joined = statements(text);
        assert!(joined.iter().any(|l| imports(l, "validate")), "{joined:?}");
        assert!(joined.iter().any(|l| imports(l, "utils")), "{joined:?}");
        assert!(joined.iter().any(|l| imports(l, "core")), "{joined:?}");
        assert_eq!(joined.last().map(String::as_str), Some("x = validate(1)"));
        assert_eq!(
            import_name(Path::new("/r/m/core/core.go")).as_deref(),
            Some("core"),
            "a Go package by its directory"
        );
    }

    #[test]
    fn a_go_file_depends_on_the_other_files_of_its_package() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("cmd")).unwrap();
        std::fs::write(root.join("go.mod"), "module example.com/uuid\n\ngo 1.19\n").unwrap();
        std::fs::write(root.join("uuid.go"), "package uuid\n").unwrap();
        std::fs::write(root.join("hash.go"), "package uuid\n").unwrap();
        std::fs::write(
            root.join("cmd/main.go"),
            "package main\n\nimport (\n\t\"fmt\"\n\t\"example.com/uuid\"\n)\n",
        )
        .unwrap();
        std::fs::write(root.join("cmd/other.go"), "package main\n").unwrap();
        let found = importers(root, &[root.join("uuid.go")], &["go".to_string()]);
        let mut files = found.files.clone();
        files.sort();
        assert_eq!(files, vec![root.join("cmd/main.go"), root.join("hash.go")]);
    }

    #[test]
    fn importers_of_importers_and_of_a_barrel_are_dependents() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/util")).unwrap();
        let files = [
            ("src/queryCache.ts", "export class QueryCache {}\n"),
            (
                "src/queryClient.ts",
                "import type { QueryCache } from './queryCache'\n",
            ),
            // Reaches queryCache only through queryClient.
            (
                "src/queryObserver.ts",
                "import type { QueryClient } from './queryClient.js'\n",
            ),
            ("src/index.ts", "export * from \"./queryClient\";\n"),
            // A barrel's importers name no file.
            ("src/util/user.ts", "import { QueryClient } from '..'\n"),
            ("src/app.ts", "import { QueryClient } from './'\n"),
            ("src/other.ts", "import { x } from './queryCacheUtils'\n"),
        ];
        for (p, text) in files {
            std::fs::write(root.join(p), text).unwrap();
        }
        let exts = vec!["ts".to_string()];
        let found = importers(root, &[root.join("src/queryCache.ts")], &exts);
        let mut got: Vec<_> = found
            .files
            .iter()
            .map(|f| f.strip_prefix(root).unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(got[0], "src/queryClient.ts", "nearest first: {got:?}");
        got.sort();
        assert_eq!(
            got,
            [
                "src/app.ts",
                "src/index.ts",
                "src/queryClient.ts",
                "src/queryObserver.ts",
                "src/util/user.ts"
            ]
        );
        assert_eq!(found.indirect, 4);
        assert!(!found.cut);
        let line = importers_line(&found, 5, true);
        assert_eq!(line, "(also checked the 5 importing files, 4 indirectly)");
        assert!(imports_relative(
            "import a from '../core.js'",
            &root.join("src/util/user.ts"),
            &root.join("src/core.ts")
        ));
        assert!(!imports_relative(
            "import a from './core.service'",
            &root.join("src/a.ts"),
            &root.join("src/core.ts")
        ));
        assert!(imports_relative(
            "import a from './core.service'",
            &root.join("src/a.ts"),
            &root.join("src/core.service.ts")
        ));
    }

    #[test]
    fn importers_are_bounded_and_skip_the_written_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("pkg")).unwrap();
        std::fs::create_dir_all(root.join(".venv")).unwrap();
        std::fs::write(root.join("pkg/core.py"), "def f(): ...\n").unwrap();
        for i in 0..30 {
            std::fs::write(
                root.join(format!("pkg/m{i:02}.py")),
                "from pkg.core import f\n",
            )
            .unwrap();
        }
        std::fs::write(root.join("pkg/other.py"), "import os\n").unwrap();
        std::fs::write(root.join(".venv/x.py"), "from pkg.core import f\n").unwrap();
        let exts = vec!["py".to_string()];
        let found = importers(root, &[root.join("pkg/core.py")], &exts);
        assert_eq!(found.files.len(), DEPENDENTS_MAX);
        assert!(found.cut);
        assert!(
            found
                .files
                .iter()
                .all(|f| f.starts_with(root.join("pkg")) && !f.ends_with("core.py"))
        );
        let none = importers(root, &[root.join("pkg/other.py")], &exts);
        assert!(none.files.is_empty() && !none.cut);
        let line = importers_line(&found, 20, true);
        assert!(
            line == "(also checked 20 importing files; for the rest: `lsp diagnostics` file \"*\")",
            "{line}"
        );
    }
}

//! The world the load works in: which test dependencies are installed (`--deps DIR` or
//! `$TOOLVISOR_TEST_DEPS`, as `scripts/install-test-deps` lays them out), the daemon config
//! that points at them, and a small multi-language project (Python, C, TypeScript, Rust, a
//! debuggee, per-client edit and patch directories) generated in the run's temp dir.

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

/// The words the fixture's data document holds (and no other document does), and its title.
pub const DOC_WORDS: &str = "zebra quartz";
pub const DOC_TITLE: &str = "Chaos runbook";

/// The kinds of resource the load reaches, as named in the report.
pub const KINDS: [&str; 15] = [
    "bash",
    "process",
    "result_read",
    "apply_patch",
    "ast_grep",
    "ast_edit",
    "lsp_pyright",
    "lsp_clangd",
    "eval_python",
    "eval_javascript",
    "debug_debugpy",
    "vibe",
    "downloads",
    "data",
    "inference",
];

/// What is installed; a kind whose server is missing is skipped (and reported as skipped).
#[derive(Clone, Debug, Default)]
pub struct Deps {
    /// `node_modules/.bin` and `lsp-venv/bin` under the deps dir.
    pub lsp_search_path: Vec<PathBuf>,
    pub pyright: bool,
    pub clangd: bool,
    /// The venv python (kernels and debugpy).
    pub python: Option<PathBuf>,
    pub node: Option<PathBuf>,
    pub debugpy: bool,
    /// llama.cpp's `llama-server` (the inference kind's model server) and the Python that
    /// writes the tiny GGUF it serves (`inference-venv`, with `gguf`).
    pub llama_server: Option<PathBuf>,
    pub gguf_python: Option<PathBuf>,
    /// Why each missing kind is skipped.
    pub skipped: Vec<(&'static str, String)>,
}

fn on_path(bin: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
}

fn runs(cmd: &Path, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

impl Deps {
    pub fn find(dir: Option<PathBuf>) -> Deps {
        let dir = dir.or_else(|| std::env::var_os("TOOLVISOR_TEST_DEPS").map(PathBuf::from));
        let mut d = Deps::default();
        let where_ = dir
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(no --deps and no $TOOLVISOR_TEST_DEPS)".into());
        if let Some(dir) = &dir {
            d.lsp_search_path = vec![dir.join("node_modules/.bin"), dir.join("lsp-venv/bin")];
            d.pyright = dir.join("node_modules/.bin/pyright-langserver").is_file();
            let python = dir.join("venv/bin/python");
            if runs(&python, &["-c", "import sys"]) {
                d.debugpy = runs(&python, &["-c", "import debugpy"]);
                d.python = Some(python);
            }
            let server = dir.join("llama-server/bin/llama-server");
            if runs(&server, &["--version"]) {
                d.llama_server = Some(server);
            }
            let python = dir.join("inference-venv/bin/python");
            if runs(&python, &["-c", "import gguf"]) {
                d.gguf_python = Some(python);
            }
        }
        d.clangd = on_path("clangd").is_some();
        d.node = on_path("node");
        if !d.pyright {
            d.skipped.push((
                "lsp_pyright",
                format!("pyright-langserver not in {where_}/node_modules/.bin"),
            ));
        }
        if !d.clangd {
            d.skipped
                .push(("lsp_clangd", "clangd is not on the PATH".into()));
        }
        if d.python.is_none() {
            d.skipped.push((
                "eval_python",
                format!("no working python at {where_}/venv/bin/python"),
            ));
        }
        if d.node.is_none() {
            d.skipped
                .push(("eval_javascript", "node is not on the PATH".into()));
        }
        if d.llama_server.is_none() || d.gguf_python.is_none() {
            d.skipped.push((
                "inference",
                format!(
                    "no runnable {where_}/llama-server/bin/llama-server, or no {where_}/inference-venv/bin/python with gguf"
                ),
            ));
        }
        if !d.debugpy {
            d.skipped.push((
                "debug_debugpy",
                format!("debugpy is not importable by {where_}/venv/bin/python"),
            ));
        }
        d
    }

    pub fn has(&self, kind: &str) -> bool {
        !self.skipped.iter().any(|(k, _)| *k == kind)
    }

    /// The daemon config: state dir, fast restarts, and every installed server.
    pub fn config(&self, state_dir: &Path, vibe_worker: &Path, hub: &str, docs: &Path) -> String {
        let q = |p: &Path| format!("{:?}", p.display().to_string());
        // A SIGTERM drains calls in flight for at most 5 s: the runner allows 10 s for the
        // exit.
        let mut c = format!(
            "state_dir = {}\n[restart]\nbackoff_ms = 20\n[limits]\ndrain_timeout_s = 5\n",
            q(state_dir)
        );
        // The loopback model hub, and the data hub's two collections (a folder of originals,
        // and the notes the load writes).
        let _ = writeln!(c, "[models]\nendpoint = {hub:?}\nconnect_timeout_s = 5");
        let _ = writeln!(
            c,
            "[data.collections.docs]\npath = {}\n[data.collections.notes]",
            q(docs)
        );
        if !self.lsp_search_path.is_empty() {
            let dirs: Vec<String> = self.lsp_search_path.iter().map(|p| q(p)).collect();
            let _ = writeln!(c, "[lsp]\nsearch_path = [{}]", dirs.join(", "));
        }
        if self.python.is_some() || self.node.is_some() {
            c.push_str("[kernels]\n");
            if let Some(p) = &self.python {
                let _ = writeln!(c, "python = {}", q(p));
            }
            if let Some(n) = &self.node {
                let _ = writeln!(c, "node = {}", q(n));
            }
        }
        if let (true, Some(p)) = (self.debugpy, &self.python) {
            let bin = p.parent().unwrap_or(Path::new("/"));
            let _ = writeln!(c, "[debug]\nsearch_path = [{}]", q(bin));
        }
        let _ = writeln!(
            c,
            "[vibe.tiers.fast]\ncommand = [{}, \"{{brief}}\"]",
            q(vibe_worker)
        );
        // A request naming the store's model loads it; a killed server restarts.
        if let Some(server) = &self.llama_server {
            let _ = writeln!(
                c,
                "[inference]\non_demand = true\nready_timeout_s = 60\ncommands.gguf = [{}, \"--model\", \"{{path}}\", \"--host\", \"127.0.0.1\", \"--port\", \"{{port}}\", \"--ctx-size\", \"{{context}}\", \"--alias\", \"{{alias}}\", \"--threads\", \"1\"]",
                q(server)
            );
        }
        c
    }

    /// The tiny llama GGUF the inference kind serves (tests/inference/make_tiny_gguf.py run
    /// by the inference venv's Python), as bytes.
    pub fn tiny_gguf(&self, dir: &Path) -> anyhow::Result<Vec<u8>> {
        let python = self
            .gguf_python
            .as_ref()
            .context("no Python with gguf to write the tiny model")?;
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/inference/make_tiny_gguf.py");
        let out = dir.join("tiny.gguf");
        let o = Command::new(python)
            .arg(&script)
            .arg(&out)
            .output()
            .with_context(|| format!("run {}", script.display()))?;
        anyhow::ensure!(
            o.status.success(),
            "make_tiny_gguf.py failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::read(&out).context("read the tiny model")
    }
}

/// The Python package the language-server calls ask about.
pub const MODELS_PY: &str = r#"class Greeter:
    """Says hello to people."""

    def greet(self, name: str) -> str:
        return "hi " + name


def make() -> Greeter:
    return Greeter()


VALUE = 42
"#;

pub const MAIN_PY: &str = r#"from app.models import Greeter, make
g = make()
h = Greeter()
print(g.greet("x"), h.greet("y"), g.greet("z"))
"#;

/// A type error pyright must report (line 2).
pub const BROKEN_PY: &str = "from app.models import make\nn: int = make()\n";

pub const MAIN_C: &str = r#"#include <stdio.h>

static int twice(int x) { return 2 * x; }

int main(void) {
    int v = twice(21);
    printf("%d\n", twice(v));
    return 0;
}
"#;

pub const APP_TS: &str = r#"export function greet(name: string): string {
  console.log("greeting", name);
  return `hi ${name}`;
}
console.log(greet("a"));
console.log(greet("b"));
"#;

pub const LIB_RS: &str = r#"pub fn parse(s: &str) -> u32 {
    let n: u32 = s.trim().parse().unwrap();
    let m: u32 = "7".parse().unwrap();
    n + m
}
"#;

/// The debuggee: the breakpoint line (`DEBUG_LINE`) is hit on every loop turn.
pub const PROG_PY: &str = r#"import time
total = 0
for i in range(1000000):
    total += i
    time.sleep(0.002)
print("done", total)
"#;
pub const DEBUG_LINE: u64 = 4;

/// The vibe worker: a grandchild (`sleep`) it waits for, then its result.
pub const VIBE_WORKER: &str = "#!/bin/sh\nsleep 0.3 &\nwait\nprintf 'vibe %s\\n' \"$1\"\n";

/// A 1 MiB text file: the large answers of the never-reading client.
pub const BIG_FILE: &str = "big/big.txt";

/// Files of the multi-file patch directory of each client.
pub const PATCH_FILES: usize = 8;

/// Static matches the `ast_grep` calls must find, by (language dir, pattern, count).
pub const GREP_CASES: [(&str, &str, u64); 3] = [
    ("py", "$A.greet($$$B)", 3),
    ("ts", "console.log($$$A)", 3),
    ("rs", "$A.unwrap()", 2),
];

fn write(root: &Path, rel: &str, text: &str) -> anyhow::Result<()> {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("mkdir {}", parent.display()))?;
    }
    std::fs::write(&p, text).with_context(|| format!("write {}", p.display()))
}

/// The text of patch file `f` at generation `gen`.
pub fn patch_text(f: usize, generation: u64) -> String {
    format!("file {f}\ngeneration {generation}\nend\n")
}

/// Write the project into `work`, and the vibe worker script into `dir`; returns its path.
pub fn generate(dir: &Path, work: &Path, clients: usize) -> anyhow::Result<PathBuf> {
    write(work, "py/pyproject.toml", "[project]\nname = \"demo\"\n")?;
    write(work, "py/app/__init__.py", "")?;
    write(work, "py/app/models.py", MODELS_PY)?;
    write(work, "py/app/main.py", MAIN_PY)?;
    write(work, "py/app/broken.py", BROKEN_PY)?;
    write(work, "c/compile_flags.txt", "-std=c11\n")?;
    write(work, "c/main.c", MAIN_C)?;
    write(work, "ts/package.json", "{\"name\": \"demo\"}\n")?;
    write(work, "ts/app.ts", APP_TS)?;
    write(work, "rs/lib.rs", LIB_RS)?;
    write(work, "dbg/prog.py", PROG_PY)?;
    let line = "the quick brown fox jumps over the lazy dog 0123456789 abcdefghij\n";
    write(work, BIG_FILE, &line.repeat((1 << 20) / line.len()))?;
    for c in 0..clients {
        for f in 0..PATCH_FILES {
            write(work, &format!("patch/c{c}/f{f}.txt"), &patch_text(f, 0))?;
        }
    }
    write(
        &dir.join("docs"),
        "runbook.md",
        &format!(
            "# {}\n\nThe {} steps for a bad night.\n\n## Rollback\n\nUndo the last release.\n",
            DOC_TITLE, DOC_WORDS
        ),
    )?;
    write(
        &dir.join("docs"),
        "other.md",
        "# Other\n\nNothing to see here.\n",
    )?;
    let worker = dir.join("vibe-worker.sh");
    std::fs::write(&worker, VIBE_WORKER).context("write the vibe worker")?;
    std::fs::set_permissions(&worker, std::fs::Permissions::from_mode(0o755))
        .context("chmod the vibe worker")?;
    Ok(worker)
}

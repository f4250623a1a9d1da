//! Helpers for the `toolvisor mcp` tests: the outside MCP clients `scripts/install-test-deps`
//! installs (the Python SDK in `.test-deps/mcp-venv`, the TypeScript SDK and the Inspector in
//! `.test-deps/node_modules`), a workdir of fixtures, and `toolvisor mcp --listen` as a child.

use std::io::{BufRead, BufReader, Cursor};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{TestDaemon, bin};

fn deps() -> PathBuf {
    match std::env::var_os("TOOLVISOR_TEST_DEPS") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.test-deps"),
    }
}

/// The scripts the tests drive (`tests/mcp/`).
pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp")
        .join(name)
}

/// The python of `.test-deps/mcp-venv`, which must import the official `mcp` SDK. Panics
/// (never skips) with what to run when it is missing.
pub fn sdk_python() -> PathBuf {
    let python = deps().join("mcp-venv/bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import mcp.client.streamable_http"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} cannot import the mcp SDK: run scripts/install-test-deps (it makes that venv)",
        python.display()
    );
    python
}

/// `.test-deps/node_modules`, which must hold `@modelcontextprotocol/sdk` and `inspector`.
pub fn node_modules() -> PathBuf {
    let dir = deps().join("node_modules");
    for pkg in [
        "@modelcontextprotocol/sdk",
        "@modelcontextprotocol/inspector",
    ] {
        assert!(
            dir.join(pkg).join("package.json").is_file(),
            "{} is missing {pkg}: run scripts/install-test-deps",
            dir.display()
        );
    }
    dir
}

/// A small PNG (a 16x8 gradient).
pub fn png() -> Vec<u8> {
    let img = image::RgbImage::from_fn(16, 8, |x, y| image::Rgb([x as u8 * 15, y as u8 * 30, 0]));
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

/// A workdir with `hello.txt`, `lib.py` (two functions) and `dot.png`.
pub fn workdir(d: &TestDaemon) -> PathBuf {
    let w = d.dir.path().join("work");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("hello.txt"), "hello from a file\n").unwrap();
    std::fs::write(
        w.join("lib.py"),
        "def f(a):\n    return a\n\ndef g():\n    pass\n",
    )
    .unwrap();
    std::fs::write(w.join("dot.png"), png()).unwrap();
    w
}

/// `toolvisor mcp --listen ADDR` against `socket`; killed on drop.
pub struct McpHttp {
    pub child: Child,
    /// What it printed: the URL (and for a Unix socket, the socket's path).
    pub url: String,
    /// The file holding the bearer token (a loopback port always has one).
    pub token_file: Option<PathBuf>,
    /// The token itself, read from that file.
    pub token: Option<String>,
}

impl McpHttp {
    pub fn start(socket: &Path, workdir: &Path, listen: &str) -> McpHttp {
        Self::start_with(socket, workdir, listen, &[])
    }

    /// With more arguments for `toolvisor mcp`.
    pub fn start_with(socket: &Path, workdir: &Path, listen: &str, more: &[&str]) -> McpHttp {
        let mut child = Command::new(bin())
            .args(["mcp", "--listen", listen, "--socket"])
            .arg(socket)
            .arg("--workdir")
            .arg(workdir)
            .args(more)
            .env_remove("TOOLVISOR_MCP_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn toolvisor mcp --listen");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line)
            .expect("read the URL toolvisor mcp prints");
        assert!(
            line.starts_with("http://"),
            "toolvisor mcp --listen printed {line:?}, not its URL"
        );
        let url = line.trim().to_string();
        let mut token_file = None;
        if !url.contains(" on /") {
            let mut second = String::new();
            out.read_line(&mut second)
                .expect("read the token file's line toolvisor mcp prints");
            let path = second
                .trim()
                .strip_prefix("token file: ")
                .unwrap_or_else(|| panic!("toolvisor mcp printed {second:?}, not its token file"));
            token_file = Some(PathBuf::from(path));
        }
        let token = token_file.as_ref().map(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_else(|e| panic!("read {}: {e}", f.display()))
                .trim()
                .to_string()
        });
        McpHttp {
            child,
            url,
            token_file,
            token,
        }
    }

    /// `host:port` of a loopback listener.
    pub fn addr(&self) -> &str {
        self.url
            .strip_prefix("http://")
            .and_then(|u| u.strip_suffix("/mcp"))
            .expect("http://ADDR/mcp")
    }

    /// `Authorization: Bearer <token>\r\n`, or nothing without a token.
    pub fn auth_header(&self) -> String {
        match &self.token {
            Some(t) => format!("Authorization: Bearer {t}\r\n"),
            None => String::new(),
        }
    }
}

impl Drop for McpHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run a client script to its end (bounded by `timeout`), returning its stdout; panics with
/// both streams when it fails.
pub fn run_client(mut cmd: Command, timeout: Duration) -> String {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the MCP client");
    let out_pipe = child.stdout.take().unwrap();
    let err_pipe = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || std::io::read_to_string(out_pipe).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(err_pipe).unwrap_or_default());
    let status = crate::wait_for("the MCP client script to finish", timeout, || {
        child.try_wait().ok().flatten()
    });
    let stdout = out.join().unwrap();
    let stderr = err.join().unwrap();
    assert!(
        status.success(),
        "the MCP client failed ({status}):\nstdout: {stdout}\nstderr: {stderr}"
    );
    stdout
}

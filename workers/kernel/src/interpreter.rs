//! Which interpreter runs a kernel, and its command line.
//!
//! Python: `[kernels] python` if set, else the run's own `.venv/bin/python`, else `python3`
//! on the child's `PATH`. A `PATH` hit is probed once per daemon for its real executable
//! (`sys.executable`), because a version-manager shim (pyenv) costs ~140 ms on every start.
//! JavaScript: `[kernels] node` if set, else `node` on the `PATH`, run behind a one-line
//! `sh` that moves the protocol to fds 3 and 4 (Node cannot `dup2` by itself).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process;

use crate::{KernelError, Language, NODE_DRIVER, PYTHON_DRIVER, Result};

/// How to start one kernel.
#[derive(Clone, Debug)]
pub(crate) struct LaunchPlan {
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    /// Variables added to (or replacing those of) the launcher's allowlisted environment.
    pub(crate) env: Vec<(String, String)>,
    /// The interpreter, for messages.
    pub(crate) interpreter: String,
}

/// Cache of probed interpreters: what was found on the `PATH` → its real executable.
#[derive(Default)]
pub(crate) struct Probes(Mutex<HashMap<PathBuf, PathBuf>>);

fn path_of(env: &[(String, String)]) -> String {
    toolvisor_kit::process::env_path(env)
        .unwrap_or_default()
        .to_string()
}

/// The first executable `name` on `path`.
fn which(name: &str, path: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path.split(':').filter(|d| !d.is_empty()).find_map(|dir| {
        let candidate = Path::new(dir).join(name);
        let meta = std::fs::metadata(&candidate).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(candidate)
    })
}

fn with_path_first(env: &[(String, String)], dir: &Path) -> (String, String) {
    let path = path_of(env);
    let dir = dir.display().to_string();
    let value = if path.split(':').next() == Some(dir.as_str()) {
        path
    } else if path.is_empty() {
        dir
    } else {
        format!("{dir}:{path}")
    };
    ("PATH".to_string(), value)
}

/// Runs `python -c 'import sys; print(sys.executable)'` through the launcher (so through the
/// spawner thread, like every child) and returns what it printed.
async fn real_executable(launcher: &Launcher, python: &Path, cwd: &Path) -> Option<PathBuf> {
    let spec = launcher.spec(
        &python.display().to_string(),
        &["-c".into(), "import sys; print(sys.executable)".into()],
        cwd,
        false,
        "kernel/probe",
    );
    let mut spawned = process::spawn(spec).await.ok()?;
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut chunk = [0u8; 1024];
        loop {
            match spawned.stdout.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    out.extend_from_slice(&chunk[..n]);
                    if out.len() > 4096 {
                        break;
                    }
                }
            }
        }
    })
    .await;
    drop(spawned.guard);
    read.ok()?;
    let text = String::from_utf8(out).ok()?;
    let found = PathBuf::from(text.trim());
    (found.is_absolute() && found.exists()).then_some(found)
}

/// The Python command line for a kernel working in `workdir`.
pub(crate) async fn python(
    configured: Option<&str>,
    workdir: &Path,
    launcher: &Launcher,
    probes: &Probes,
) -> Result<LaunchPlan> {
    let no = |message: String| KernelError::NoInterpreter {
        language: Language::Python,
        message,
    };
    let search = path_of(&launcher.env);
    let (python, probe) = match configured.filter(|c| !c.is_empty()) {
        Some(c) if c.contains('/') => {
            let p = workdir.join(c);
            if !p.exists() {
                return Err(no(format!(
                    "the configured `[kernels] python` {} does not exist",
                    p.display()
                )));
            }
            (p, false)
        }
        Some(c) => (
            which(c, &search).ok_or_else(|| {
                no(format!(
                    "the configured `[kernels] python` {c:?} is not on PATH ({search})"
                ))
            })?,
            true,
        ),
        None => {
            let venv = workdir.join(".venv/bin/python");
            if venv.exists() {
                (venv, false)
            } else {
                (
                    which("python3", &search).ok_or_else(|| {
                        no(format!(
                            "python3 is not on PATH ({search}) and {} does not exist",
                            venv.display()
                        ))
                    })?,
                    true,
                )
            }
        }
    };
    let python = if probe {
        let cached = probes
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&python)
            .cloned();
        match cached {
            Some(real) => real,
            None => {
                let real = real_executable(launcher, &python, workdir)
                    .await
                    .unwrap_or_else(|| python.clone());
                if real != python {
                    tracing::info!(found = %python.display(), real = %real.display(), "python kernels start the real interpreter, not the shim");
                }
                probes
                    .0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(python.clone(), real.clone());
                real
            }
        }
    } else {
        python
    };
    let mut env = Vec::new();
    if let Some(bin) = python.parent() {
        env.push(with_path_first(&launcher.env, bin));
        if let Some(root) = bin.parent()
            && root.join("pyvenv.cfg").exists()
        {
            env.push(("VIRTUAL_ENV".into(), root.display().to_string()));
        }
    }
    Ok(LaunchPlan {
        program: python.display().to_string(),
        args: vec!["-u".into(), "-c".into(), PYTHON_DRIVER.into()],
        env,
        interpreter: python.display().to_string(),
    })
}

/// The Node command line; `heap_mb` caps V8's heap (the memory cap, when set).
pub(crate) fn node(
    configured: Option<&str>,
    typescript: Option<&str>,
    workdir: &Path,
    launcher: &Launcher,
    heap_mb: Option<u64>,
) -> Result<LaunchPlan> {
    let no = |message: String| KernelError::NoInterpreter {
        language: Language::Javascript,
        message,
    };
    let search = path_of(&launcher.env);
    let node = match configured.filter(|c| !c.is_empty()) {
        Some(c) if c.contains('/') => {
            let p = workdir.join(c);
            if !p.exists() {
                return Err(no(format!(
                    "the configured `[kernels] node` {} does not exist",
                    p.display()
                )));
            }
            p
        }
        Some(c) => which(c, &search).ok_or_else(|| {
            no(format!(
                "the configured `[kernels] node` {c:?} is not on PATH ({search})"
            ))
        })?,
        None => {
            which("node", &search).ok_or_else(|| no(format!("node is not on PATH ({search})")))?
        }
    };
    let sh = if Path::new("/bin/sh").exists() {
        "/bin/sh"
    } else {
        "sh"
    };
    let mut args = vec![
        "-c".to_string(),
        "exec 3<&0 4>&1 </dev/null >&2; exec \"$@\"".to_string(),
        "sh".to_string(),
        node.display().to_string(),
        "--expose-internals".to_string(),
    ];
    if let Some(mb) = heap_mb {
        args.push(format!("--max-old-space-size={mb}"));
    }
    args.push("-e".into());
    args.push(NODE_DRIVER.into());
    // Where the driver finds the `typescript` package when Node cannot strip types itself.
    let env = typescript
        .map(|t| {
            let dir = workdir.join(t).display().to_string();
            vec![("TOOLVISOR_TYPESCRIPT".to_string(), dir)]
        })
        .unwrap_or_default();
    Ok(LaunchPlan {
        program: sh.to_string(),
        args,
        env,
        interpreter: node.display().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interpreter_directory_goes_first_on_path_once() {
        let env = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
        assert_eq!(
            with_path_first(&env, Path::new("/venv/bin")).1,
            "/venv/bin:/usr/bin:/bin"
        );
        assert_eq!(
            with_path_first(&env, Path::new("/usr/bin")).1,
            "/usr/bin:/bin"
        );
        assert_eq!(with_path_first(&[], Path::new("/x")).1, "/x");
    }

    #[tokio::test]
    async fn a_missing_configured_interpreter_is_named() {
        let launcher = Launcher {
            env: vec![("PATH".into(), "/nonexistent".into())],
            ..Launcher::default()
        };
        let err = python(
            Some("/no/such/python"),
            Path::new("/"),
            &launcher,
            &Probes::default(),
        )
        .await
        .unwrap_err();
        assert!(
            err.to_string().contains("/no/such/python does not exist"),
            "{err}"
        );
        let err = python(None, Path::new("/"), &launcher, &Probes::default())
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("python3 is not on PATH (/nonexistent)"),
            "{err}"
        );
        let err = node(None, None, Path::new("/"), &launcher, None).unwrap_err();
        assert!(matches!(
            err,
            KernelError::NoInterpreter {
                language: Language::Javascript,
                ..
            }
        ));
        let sh = node(
            Some("/bin/sh"),
            Some("ts"),
            Path::new("/"),
            &launcher,
            Some(512),
        )
        .unwrap();
        assert!(sh.args.contains(&"--max-old-space-size=512".to_string()));
        assert_eq!(sh.interpreter, "/bin/sh");
        // A relative `[kernels] typescript` is taken from the workdir.
        assert_eq!(
            sh.env,
            vec![("TOOLVISOR_TYPESCRIPT".to_string(), "/ts".to_string())]
        );
    }
}

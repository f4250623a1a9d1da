//! A language server's temporary files are its own: clangd writes a `preamble-*.pch` per
//! file it opens into `TMPDIR`, and a server killed by a signal (an idle stop, a crash, the
//! daemon's SIGKILL) leaves them behind — hundreds of megabytes in `/tmp` over a day of a
//! test suite. Each server now gets a private `TMPDIR` that goes when it does, and what a
//! daemon killed too hard leaves the next daemon removes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};
use toolvisor_tests::{TestDaemon, wait_for};

/// The files under `dir` whose names start with `prefix`, at any depth.
fn files_named(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if e.file_name().to_string_lossy().starts_with(prefix) {
                out.push(p);
            }
        }
    }
    out
}

/// The live processes whose `TMPDIR` is below `dir`.
fn running_in(dir: &Path) -> Vec<u32> {
    let needle = format!("TMPDIR={}", dir.display());
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|v| v.starts_with(needle.as_bytes()))
            })
        })
        .collect()
}

#[test]
fn a_servers_temp_files_go_with_it_and_a_killed_daemons_with_the_next() {
    require("clangd");
    let p = project(&[
        ("compile_flags.txt", "-std=c11\n"),
        ("util.h", "int twice(int x);\n"),
        (
            "main.c",
            "#include <stdio.h>\n#include \"util.h\"\n\nint main(void) {\n  printf(\"%d\\n\", twice(2));\n  return 0;\n}\n",
        ),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tmpdir = tmp.path().to_str().unwrap().to_string();
    let mut d = TestDaemon::start_with_env(dir, &lsp_config(""), &[("TMPDIR", &tmpdir)]);
    let preambles = || files_named(tmp.path(), "preamble-");
    let open = |d: &TestDaemon| {
        ok_in(
            d,
            p.path(),
            "lsp",
            json!({"op": "diagnostics", "file": "main.c"}),
        );
        wait_for("clangd's preamble file", Duration::from_secs(30), || {
            (!preambles().is_empty()).then_some(())
        });
    };
    open(&d);
    let uid = nix::unistd::geteuid().as_raw();
    let scratch = tmp.path().join(format!("toolvisor-{uid}-scratch"));
    assert!(
        preambles().iter().all(|f| f.starts_with(&scratch)),
        "clangd's preamble is not in its scratch directory: {:?}",
        preambles()
    );

    // Killed too hard to clean up: the next daemon removes what is left.
    d.kill_hard();
    wait_for(
        "clangd to die with the daemon",
        Duration::from_secs(20),
        || running_in(&scratch).is_empty().then_some(()),
    );
    d.spawn(&lsp_config(""));
    assert_eq!(
        preambles(),
        Vec::<PathBuf>::new(),
        "a killed daemon's server files are still there after the next daemon started"
    );

    // A clean stop: nothing is left but the empty scratch base.
    open(&d);
    d.stop();
    let left = files_named(tmp.path(), "");
    assert!(left.is_empty(), "left behind: {left:?}");
    let dirs: Vec<_> = std::fs::read_dir(&scratch)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(dirs.is_empty(), "directories left: {dirs:?}");
}

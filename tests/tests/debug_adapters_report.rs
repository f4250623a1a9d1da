//! `adapters` says which adapters work here and why not: debugpy and lldb-dap resolve, delve
//! and dart configured with binaries that exist on no machine are "binary not found" (the
//! test must not depend on whether this machine has dlv or dart); debugpy runs
//! on the project's own `.venv` before any python on the path, so the program sees the
//! project's packages.

use std::process::Command;

use serde_json::{Value, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::debug::{dbg, debug_config, require_debugpy, require_lldb_dap, stopped_at};
use toolvisor_tests::lsp::{canonical, project, test_deps};

fn adapter<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["adapters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("adapter {name} in {report}"))
}

#[test]
fn adapters_says_what_works_here_and_why_not() {
    require_debugpy();
    require_lldb_dap();
    let p = project(&[("go.mod", "module x\n")]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config(
        r#"[debug.adapters.delve]
commands = [["toolvisor-test-absent-dlv", "dap"]]
markers = ["go.mod"]
extensions = ["go"]

[debug.adapters.dart]
commands = [["toolvisor-test-absent-dart", "debug_adapter"]]
markers = ["pubspec.yaml"]
extensions = ["dart"]
"#,
    ));
    let report = dbg(&d, w, json!({"op": "adapters"}));
    let debugpy = adapter(&report, "debugpy");
    assert_eq!(debugpy["available"], true, "{report}");
    assert!(debugpy["version"].as_str().is_some(), "{report}");
    assert_eq!(adapter(&report, "lldb")["available"], true, "{report}");
    assert!(
        adapter(&report, "lldb")["command"]
            .as_str()
            .unwrap()
            .contains("lldb-dap"),
        "{report}"
    );
    for absent in ["delve", "dart"] {
        let a = adapter(&report, absent);
        assert_eq!(a["available"], false, "{report}");
        assert!(
            a["reason"]
                .as_str()
                .unwrap()
                .starts_with("binary not found"),
            "{report}"
        );
    }
    // The root marker is reported; the binary is still what is missing.
    assert_eq!(
        adapter(&report, "delve")["root"],
        canonical(w).display().to_string(),
        "{report}"
    );
    assert!(
        adapter(&report, "dart")["root_note"]
            .as_str()
            .unwrap()
            .contains("pubspec.yaml")
    );
}

#[test]
fn debugpy_runs_on_the_project_virtualenv_before_the_path() {
    require_debugpy();
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"v\"\n"),
        (
            "prog.py",
            "import sys\nimport only_in_project_venv\nvalue = only_in_project_venv.VALUE\nprint(value)\n",
        ),
    ]);
    let w = p.path();
    // A virtualenv with a package the system python lacks; debugpy comes from the test venv
    // through a .pth line.
    let out = Command::new("python3")
        .args(["-m", "venv", "--without-pip", ".venv"])
        .current_dir(w)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python3 -m venv: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let site = Command::new(w.join(".venv/bin/python"))
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ])
        .output()
        .unwrap();
    let site = std::path::PathBuf::from(String::from_utf8_lossy(&site.stdout).trim());
    std::fs::write(
        site.join("only_in_project_venv.py"),
        "VALUE = 'from the project venv'\n",
    )
    .unwrap();
    let deps_site = Command::new(test_deps().join("venv/bin/python"))
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ])
        .output()
        .unwrap();
    std::fs::write(
        site.join("test_deps.pth"),
        String::from_utf8_lossy(&deps_site.stdout).trim(),
    )
    .unwrap();
    let system = Command::new("python3")
        .args(["-c", "import only_in_project_venv"])
        .output()
        .unwrap();
    assert!(
        !system.status.success(),
        "the system python must lack the package"
    );

    let d = TestDaemon::start(&debug_config(""));
    let report = dbg(&d, w, json!({"op": "adapters"}));
    let venv_python = canonical(w).join(".venv/bin/python").display().to_string();
    assert_eq!(
        adapter(&report, "debugpy")["python"],
        venv_python.as_str(),
        "{report}"
    );
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "lines": [4]}),
    );
    let launched = dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    assert_eq!(stopped_at(&launched), ("prog.py".into(), 4), "{launched}");
    let ev = dbg(&d, w, json!({"op": "evaluate", "expression": "value"}));
    assert_eq!(ev["result"], "'from the project venv'", "{ev}");
    let exe = dbg(&d, w, json!({"op": "evaluate", "expression": "sys.prefix"}));
    assert!(exe["result"].as_str().unwrap().contains(".venv"), "{exe}");
}

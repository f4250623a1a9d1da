//! The Python client package (`clients/python`): `pip install` of the repository's package
//! works (into a target dir, with the pip of the clients venv that `scripts/install-test-deps`
//! makes), its unittest suite passes against a real daemon, imported from that install, and the
//! complete example of docs/CLIENTS.md runs as printed; pyright finds no type error in any of it.

use std::process::Command;

use toolvisor_tests::clients;

#[test]
fn the_python_client_installs_with_pip_and_passes_its_suite() {
    let python = clients::test_deps().join("clients-venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run scripts/install-test-deps (it makes the clients venv)",
        python.display()
    );
    let d = clients::daemon();
    let tmp = tempfile::tempdir().unwrap();
    // Build from a copy: setuptools writes build/ and *.egg-info next to the sources.
    let pkg = tmp.path().join("pkg");
    clients::copy_tree(&clients::repo().join("clients/python"), &pkg);
    let site = tmp.path().join("site");
    clients::run(
        "pip install clients/python",
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-index",
                "--no-deps",
                "--no-build-isolation",
                "--disable-pip-version-check",
                "--target",
            ])
            .arg(&site)
            .arg(&pkg),
    );
    assert!(
        site.join("toolvisor/py.typed").is_file(),
        "the installed package lacks its PEP 561 marker py.typed"
    );
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let tests = pkg.join("tests");
    let out = clients::run(
        "the Python client's unittest suite",
        Command::new(&python)
            .args(["-B", "-m", "unittest", "discover", "-v", "-s"])
            .arg(&tests)
            .arg("-t")
            .arg(&tests)
            .current_dir(&work)
            .env("PYTHONPATH", &site)
            .env("TOOLVISOR_SOCKET", &d.socket)
            .env("TOOLVISOR_TEST_WORKDIR", &work),
    );
    // Skipped tests would pass silently: every test must have run.
    assert!(!out.contains("skipped"), "tests were skipped:\n{out}");
    assert!(out.contains("\nOK"), "{out}");
    // The complete example of docs/CLIENTS.md runs as printed.
    let example = tmp.path().join("example.py");
    std::fs::write(&example, clients::doc_example("python")).unwrap();
    let out = clients::run(
        "the Python example of docs/CLIENTS.md",
        Command::new(&python)
            .arg("-B")
            .arg(&example)
            .current_dir(&work)
            .env("PYTHONPATH", &site)
            .env("TOOLVISOR_SOCKET", &d.socket),
    );
    for line in [
        "stream: building\n",
        "exit code: 0",
        "approval asked: bash: rm -rf build",
        "denied: `bash` was not approved: only echo commands are allowed in this demo",
        "not found: not_found -",
        "answers ping 7",
    ] {
        assert!(out.contains(line), "expected {line:?} in\n{out}");
    }
    // The package's types hold up: pyright (a test dependency already, for the lsp tests)
    // checks the sources, the tests, the bench and the example against the installed copy.
    let pyright = clients::test_deps().join("node_modules/.bin/pyright");
    assert!(
        pyright.is_file(),
        "{} is missing: run scripts/install-test-deps",
        pyright.display()
    );
    std::fs::write(
        tmp.path().join("pyrightconfig.json"),
        r#"{"include": ["example.py", "pkg/src", "pkg/tests", "pkg/bench"], "extraPaths": ["site"], "pythonVersion": "3.10"}"#,
    )
    .unwrap();
    let out = clients::run(
        "pyright over the Python client",
        Command::new(&pyright).current_dir(tmp.path()),
    );
    assert!(out.contains("0 errors"), "{out}");
    // The suite imported the installed copy, not the sources.
    let imported = clients::run(
        "import toolvisor",
        Command::new(&python)
            .args(["-B", "-c", "import toolvisor; print(toolvisor.__file__)"])
            .current_dir(&work)
            .env("PYTHONPATH", &site),
    );
    assert!(imported.contains(&site.display().to_string()), "{imported}");
}

//! The TypeScript client package (`clients/typescript`): it compiles with `tsc` (strict, with
//! the compile-time checks that its frame manifest matches its frame types), and its
//! `node --test` suite passes against a real daemon, and the complete example of
//! docs/CLIENTS.md compiles against the built package and runs as printed.

use std::process::Command;

use toolvisor_tests::clients;

#[test]
fn the_typescript_client_compiles_and_passes_its_suite() {
    let modules = clients::test_deps().join("node_modules");
    for dep in ["typescript/bin/tsc", "@types/node/package.json"] {
        assert!(
            modules.join(dep).is_file(),
            "{} is missing: run scripts/install-test-deps",
            modules.join(dep).display()
        );
    }
    let node = toolvisor_tests::eval::node();
    let d = clients::daemon();
    let tmp = tempfile::tempdir().unwrap();
    // Build a copy, so the suite never writes into the repository.
    let pkg = tmp.path().join("pkg");
    clients::copy_tree(&clients::repo().join("clients/typescript"), &pkg);
    std::os::unix::fs::symlink(&modules, pkg.join("node_modules")).unwrap();
    clients::run(
        "tsc -p clients/typescript",
        Command::new(&node)
            .arg(modules.join("typescript/bin/tsc"))
            .arg("-p")
            .arg(&pkg),
    );
    assert!(
        pkg.join("dist/src/index.d.ts").is_file(),
        "tsc wrote no type declarations"
    );
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let out = clients::run(
        "the TypeScript client's node --test suite",
        Command::new(&node)
            .arg("--test")
            .arg(pkg.join("dist/test/"))
            .current_dir(&work)
            .env("TOOLVISOR_SOCKET", &d.socket)
            .env("TOOLVISOR_TEST_WORKDIR", &work),
    );
    assert!(out.contains("# fail 0"), "{out}");
    assert!(out.contains("# skipped 0"), "{out}");
    assert!(!out.contains("# pass 0\n"), "no test ran:\n{out}");

    // The complete example of docs/CLIENTS.md compiles against the built package and runs,
    // in an app of its own that has the package in its node_modules, as a user's would.
    let app = tmp.path().join("app");
    let app_modules = app.join("node_modules");
    std::fs::create_dir_all(app_modules.join("@types")).unwrap();
    std::os::unix::fs::symlink(modules.join("@types/node"), app_modules.join("@types/node"))
        .unwrap();
    std::os::unix::fs::symlink(&pkg, app_modules.join("toolvisor-client")).unwrap();
    std::fs::write(app.join("package.json"), "{\"type\": \"module\"}\n").unwrap();
    std::fs::write(app.join("example.ts"), clients::doc_example("ts")).unwrap();
    clients::run(
        "tsc of the TypeScript example of docs/CLIENTS.md",
        Command::new(&node)
            .arg(modules.join("typescript/bin/tsc"))
            .args([
                "--strict",
                "--target",
                "es2022",
                "--module",
                "nodenext",
                "--moduleResolution",
                "nodenext",
                "--types",
                "node",
                "--outDir",
            ])
            .arg(app.join("dist"))
            .arg(app.join("example.ts"))
            .current_dir(&app),
    );
    let out = clients::run(
        "the TypeScript example of docs/CLIENTS.md",
        Command::new(&node)
            .arg(app.join("dist/example.js"))
            .current_dir(&work)
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
}

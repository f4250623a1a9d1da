//! The TypeScript client package (`clients/typescript`): it compiles with `tsc` (strict, with
//! the compile-time checks that its frame manifest matches its frame types), and its
//! `node --test` suite passes against a real daemon.

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
}

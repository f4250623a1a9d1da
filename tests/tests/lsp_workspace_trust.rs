//! Workspace trust: a read call never runs an untrusted root's project code. In an untrusted
//! root `lsp diagnostics "*"` refuses to run `cargo check` (which runs `build.rs`) and says
//! how to trust the root, and rust-analyzer runs without build scripts; a root trusted by
//! config, or by an approval for one run, runs the checker; `lsp status` says per root
//! whether it is trusted and what that changes.

use std::path::Path;

use serde_json::{Value, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{canonical, client_in, err_in, lsp_config, ok_in, project, require};

/// A crate whose build script leaves a marker file in the crate's directory when it runs, and
/// whose `.cargo/config.toml` names a rustc wrapper (project code even `cargo metadata` runs)
/// that leaves another.
fn crate_with_build_script() -> tempfile::TempDir {
    let p = project(&[
        (
            ".cargo/config.toml",
            "[build]\nrustc-wrapper = \"./wrap.sh\"\n",
        ),
        (
            "wrap.sh",
            "#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/wrapper-ran.marker\"\nshift\nexec rustc \"$@\"\n",
        ),
        (
            "Cargo.toml",
            "[package]\nname = \"trustme\"\nversion = \"0.1.0\"\nedition = \"2021\"\nbuild = \"build.rs\"\n\n[workspace]\n",
        ),
        (
            "build.rs",
            "fn main() {\n    let dir = std::env::var(\"CARGO_MANIFEST_DIR\").unwrap();\n    std::fs::write(std::path::Path::new(&dir).join(\"build-ran.marker\"), \"build.rs ran\\n\").unwrap();\n}\n",
        ),
        (
            "src/main.rs",
            "fn helper() -> u32 {\n    1\n}\n\nfn main() {\n    let x = helper();\n    println!(\"{x}\");\n}\n",
        ),
    ]);
    let wrap = p.path().join("wrap.sh");
    std::fs::set_permissions(&wrap, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p
}

fn wrapper_ran(root: &Path) -> bool {
    root.join("wrapper-ran.marker").exists()
}

fn marker(root: &Path) -> bool {
    root.join("build-ran.marker").exists()
}

fn rust_status(status: &Value) -> &Value {
    status["languages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["language"] == "rust")
        .unwrap_or_else(|| panic!("rust missing from {status}"))
}

fn call_as(d: &TestDaemon, root: &Path, run: &str, args: Value) -> Outcome {
    client_in(d, root, run)
        .call_with("c", "lsp", args, |_| false)
        .expect("call")
        .outcome
}

#[test]
fn untrusted_root_runs_no_project_code_until_an_approval_trusts_it_for_one_run() {
    require("rust-analyzer");
    let p = crate_with_build_script();
    let root = canonical(p.path());
    // A rust-toolchain.toml naming a toolchain directory of the project's choosing: the
    // rustup proxies would run its `rust-analyzer`, `cargo` and `rustc`.
    let evil = root.join("evil/bin");
    std::fs::create_dir_all(&evil).unwrap();
    for tool in ["rust-analyzer", "cargo", "rustc"] {
        let path = evil.join(tool);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho {tool} >> {:?}\nexit 1\n",
                root.join("toolchain-ran.marker").display().to_string()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    std::fs::write(
        root.join("rust-toolchain.toml"),
        format!(
            "[toolchain]\npath = {:?}\n",
            root.join("evil").display().to_string()
        ),
    )
    .unwrap();
    let d = TestDaemon::start(&lsp_config(""));

    // The project checker would run build.rs: refused, with what and how to trust.
    let e = err_in(&d, &root, "lsp", json!({"op": "diagnostics", "file": "*"}));
    assert_eq!(e.kind, ErrorKind::PolicyDenied, "{e}");
    assert!(e.message.contains("untrusted"), "{e}");
    assert!(e.message.contains("cargo check"), "{e}");
    assert!(
        e.hint.contains("[trust] roots") && e.hint.contains("\"op\":\"trust\""),
        "{e}"
    );
    assert!(!marker(&root), "cargo check ran build.rs from a read call");

    // rust-analyzer runs restricted: navigation works, and once the workspace is loaded
    // (ready means quiescent, after any build-script run) no build script has run.
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "hover", "file": "src/main.rs", "line": 6, "symbol": "helper"}),
    );
    assert!(v["markdown"].as_str().unwrap().contains("fn helper"), "{v}");
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "diagnostics", "file": "src/main.rs"}),
    );
    assert!(
        v["server"]["id"]
            .as_str()
            .unwrap()
            .ends_with("(restricted)"),
        "{v}"
    );
    assert!(
        !marker(&root),
        "rust-analyzer ran build.rs in an untrusted root"
    );
    assert!(
        !wrapper_ran(&root),
        "rust-analyzer's cargo ran the project's rustc wrapper in an untrusted root"
    );
    assert!(
        !root.join("toolchain-ran.marker").exists(),
        "the rustup proxies ran the toolchain the project's rust-toolchain.toml names"
    );
    // The trusted run below would run the project's toolchain, as it may: this test's fake
    // one cannot build, so it goes.
    std::fs::remove_file(root.join("rust-toolchain.toml")).unwrap();

    // Status says the root is untrusted and what that withholds.
    let s = ok_in(&d, &root, "lsp", json!({"op": "status"}));
    let rust = rust_status(&s);
    assert_eq!(rust["trusted"], false, "{s}");
    let changes = rust["untrusted_changes"].to_string();
    assert!(
        changes.contains("build scripts") && changes.contains("cargo check"),
        "{s}"
    );
    let trust = s["trust"].as_array().unwrap();
    let entry = trust
        .iter()
        .find(|t| t["root"] == root.display().to_string())
        .unwrap_or_else(|| panic!("no trust entry for the root: {s}"));
    assert_eq!(entry["by"], "no", "{s}");
    let servers = s["servers"].as_array().unwrap();
    assert!(
        servers
            .iter()
            .any(|x| x["language"] == "rust" && x["mode"] == "restricted"),
        "{s}"
    );
    assert!(s["text"].as_str().unwrap().contains("untrusted"), "{s}");

    // `lsp trust` asks the user with the root named; declined, nothing changes.
    let mut asked = String::new();
    let declined = client_in(&d, &root, "run-a")
        .call_with("c", "lsp", json!({"op": "trust"}), |req| {
            asked = req.summary.clone();
            false
        })
        .unwrap()
        .outcome;
    assert!(matches!(declined, Outcome::Err(ref e) if e.kind == ErrorKind::ApprovalDenied));
    assert!(
        asked.contains(&format!("trust {}", root.display())) && asked.contains("build scripts"),
        "{asked}"
    );
    assert!(matches!(
        call_as(&d, &root, "run-a", json!({"op": "diagnostics", "file": "*"})),
        Outcome::Err(ref e) if e.kind == ErrorKind::PolicyDenied
    ));

    // Approved: trusted for run-a only.
    let granted = client_in(&d, &root, "run-a")
        .call_with("c", "lsp", json!({"op": "trust"}), |_| true)
        .unwrap()
        .outcome;
    match granted {
        Outcome::Ok(v) => assert!(v.0["text"].as_str().unwrap().contains("trusted"), "{}", v.0),
        Outcome::Err(e) => panic!("lsp trust failed: {e}"),
    }
    match call_as(
        &d,
        &root,
        "run-b",
        json!({"op": "diagnostics", "file": "*"}),
    ) {
        Outcome::Err(e) => assert_eq!(e.kind, ErrorKind::PolicyDenied, "{e}"),
        Outcome::Ok(v) => panic!("run-b ran the checker on run-a's trust: {}", v.0),
    }
    assert!(!marker(&root));
    match call_as(&d, &root, "run-a", json!({"op": "status"})) {
        Outcome::Ok(v) => {
            let entry = v.0["trust"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["root"] == root.display().to_string())
                .cloned()
                .unwrap();
            assert_eq!(entry["by"], "approval", "{}", v.0);
            assert_eq!(entry["approved_runs"], json!(["run-a"]), "{}", v.0);
        }
        Outcome::Err(e) => panic!("status failed: {e}"),
    }
    match call_as(
        &d,
        &root,
        "run-a",
        json!({"op": "diagnostics", "file": "*"}),
    ) {
        Outcome::Ok(v) => assert!(
            v.0["checker"].as_str().unwrap().starts_with("cargo check"),
            "{}",
            v.0
        ),
        Outcome::Err(e) => panic!("the trusted run's checker did not run: {e}"),
    }
    assert!(marker(&root), "cargo check ran without its build script");
}

#[test]
fn a_root_trusted_by_config_runs_the_checker_and_status_says_so() {
    let p = crate_with_build_script();
    let root = canonical(p.path());
    let d = TestDaemon::start(&lsp_config(&format!(
        "\n[trust]\nroots = [{:?}]\n",
        root.display().to_string()
    )));
    let s = ok_in(&d, &root, "lsp", json!({"op": "status"}));
    let rust = rust_status(&s);
    assert_eq!(rust["trusted"], true, "{s}");
    assert!(rust["trust"].as_str().unwrap().contains("config"), "{s}");
    assert_eq!(rust["untrusted_changes"], json!([]), "{s}");

    let v = ok_in(&d, &root, "lsp", json!({"op": "diagnostics", "file": "*"}));
    assert!(
        v["checker"].as_str().unwrap().starts_with("cargo check"),
        "{v}"
    );
    assert!(
        marker(&root),
        "the trusted root's checker did not run build.rs"
    );
}

#[test]
fn typescript_in_an_untrusted_root_runs_the_servers_own_typescript_not_the_projects() {
    require("typescript-language-server");
    // The project ships its own TypeScript, whose tsserver leaves a marker when it runs.
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true}}\n",
        ),
        (
            "src/a.ts",
            "export function helper(): number {\n    return 1;\n}\nexport const x = helper();\n",
        ),
        (
            "node_modules/typescript/package.json",
            "{\"name\": \"typescript\", \"version\": \"5.9.3\"}\n",
        ),
        (
            "node_modules/typescript/lib/tsserver.js",
            "require('fs').writeFileSync(require('path').join(__dirname, '..', '..', '..', 'tsserver-ran.marker'), 'ran\\n');\nprocess.exit(1);\n",
        ),
    ]);
    let root = canonical(p.path());
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "hover", "file": "src/a.ts", "line": 4, "symbol": "helper"}),
    );
    assert!(v["markdown"].as_str().unwrap().contains("helper"), "{v}");
    assert!(
        !root.join("tsserver-ran.marker").exists(),
        "the project's own tsserver ran in an untrusted root"
    );
}

#[test]
fn a_server_that_runs_project_code_without_a_restricted_mode_does_not_start_untrusted() {
    // Like dart's analyzer plugins: configured as data. `sh` resolves; it is never started.
    let p = project(&[("plg.toml", ""), ("a.plg", "x\n")]);
    let root = canonical(p.path());
    let d = TestDaemon::start(&lsp_config(
        "[lsp.languages.plugged]\nextensions = [\"plg\"]\nmarkers = [\"plg.toml\"]\nservers = [[\"sh\"]]\nserver_runs_project_code = true\n",
    ));
    let e = err_in(
        &d,
        &root,
        "lsp",
        json!({"op": "hover", "file": "a.plg", "line": 1, "symbol": "x"}),
    );
    assert_eq!(e.kind, ErrorKind::PolicyDenied, "{e}");
    assert!(e.message.contains("executes project code"), "{e}");
    assert!(e.hint.contains("\"op\":\"trust\""), "{e}");
    let s = ok_in(&d, &root, "lsp", json!({"op": "status"}));
    let plugged = s["languages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["language"] == "plugged")
        .cloned()
        .unwrap();
    assert_eq!(plugged["state"], "untrusted", "{s}");
    assert!(
        plugged["untrusted_changes"]
            .to_string()
            .contains("does not start"),
        "{s}"
    );
    assert!(s["servers"].as_array().unwrap().is_empty(), "{s}");
}

#[test]
fn lsp_trust_needs_a_write_surface_and_asks_nobody_below_it() {
    let d = TestDaemon::start(&lsp_config(""));
    let mut asked = false;
    let mut c = d.client(
        toolvisor_protocol::codec::Codec::Json,
        toolvisor_protocol::wire::Tier::Read,
        true,
    );
    let reply = c
        .call_with("c", "lsp", json!({"op": "trust"}), |_| {
            asked = true;
            true
        })
        .unwrap();
    match reply.outcome {
        Outcome::Err(e) => {
            assert_eq!(e.kind, ErrorKind::SurfaceDenied, "{e}");
            assert!(e.message.contains("trust"), "{e}");
        }
        Outcome::Ok(v) => panic!("a read surface trusted a root: {}", v.0),
    }
    assert!(!asked, "the user was asked although the surface refuses");
    // Other lsp ops stay read tier.
    let reply = c.call("c", "lsp", json!({"op": "status"})).unwrap();
    assert!(matches!(reply.outcome, Outcome::Ok(_)));
}

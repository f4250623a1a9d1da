//! `ast_grep` walks like ripgrep: `.gitignore` inside a git checkout, `.ignore` anywhere, and
//! hidden files and directories are skipped; a file named explicitly is searched anyway.

use serde_json::json;
use toolvisor_tests::TestDaemon;

#[test]
fn ignored_and_hidden_files_are_not_searched() {
    let d = TestDaemon::start("");
    let repo = d.dir.path().join("repo");
    for dir in [".git", "src", "build", "vendor", ".hidden", "src/.cache"] {
        std::fs::create_dir_all(repo.join(dir)).unwrap();
    }
    std::fs::write(repo.join(".gitignore"), "build/\n*.gen.py\n").unwrap();
    std::fs::write(repo.join(".ignore"), "vendor/\n").unwrap();
    let call = "print(1)\n";
    for file in [
        "src/a.py",
        "src/b.py",
        "build/out.py",
        "src/x.gen.py",
        "vendor/lib.py",
        ".hidden/h.py",
        "src/.cache/c.py",
        "src/.dot.py",
    ] {
        std::fs::write(repo.join(file), call).unwrap();
    }
    let v = d.ok(
        "c",
        "ast_grep",
        json!({"pattern": "print($A)", "path": repo, "language": "python"}),
    );
    let mut found: Vec<String> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["path"]
                .as_str()
                .unwrap()
                .strip_prefix(&format!(
                    "{}/",
                    repo.strip_prefix(std::env::temp_dir()).unwrap().display()
                ))
                .unwrap()
                .to_string()
        })
        .collect();
    found.sort();
    assert_eq!(found, vec!["src/a.py", "src/b.py"], "{v:#}");
    assert_eq!(v["files_searched"], 2);

    // Named explicitly, an ignored file is searched.
    let v = d.ok(
        "c",
        "ast_grep",
        json!({"pattern": "print($A)", "path": repo.join("build/out.py")}),
    );
    assert_eq!(v["total"], 1);
}

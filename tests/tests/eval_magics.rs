//! IPython idioms in a real Python kernel: `!cmd`, `x = !cmd`, `%cd`, `%%bash`, `%timeit`,
//! `%%timeit`, `%matplotlib`, and `%pip install` of a package from PyPI that the next cell
//! imports.

use serde_json::json;
use toolvisor_tests::eval::{self, args};

#[test]
fn shell_cd_bash_and_timeit_idioms_run_as_plain_code() {
    let d = eval::daemon("");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("marker.txt"), "x").unwrap();
    let v = eval::ok(&d, "c", "name = 'world'\n!echo hello {name}");
    assert_eq!(v["text"], "hello world\n");
    let v = eval::ok(&d, "c", "lines = !printf 'a\\nb\\n'\nlines, lines.s");
    assert_eq!(v["text"], "(['a', 'b'], 'a b')\n");
    let v = eval::ok(
        &d,
        "c",
        &format!(
            "%cd {}\nimport os\nsorted(os.listdir('.'))",
            dir.path().display()
        ),
    );
    assert_eq!(
        v["text"],
        format!(
            "{}\n['marker.txt']\n",
            dir.path().canonicalize().unwrap().display()
        )
    );
    let v = eval::ok(&d, "c", "%%bash\necho from bash $((1 + 2))\nls");
    assert_eq!(v["text"], "from bash 3\nmarker.txt\n");
    let v = eval::ok(&d, "c", "%timeit -n 10 -r 2 sum(range(100))");
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("per loop (mean ± std. dev. of 2 runs, 10 loops each)"),
        "{}",
        v["text"]
    );
    let v = eval::ok(&d, "c", "%%timeit -n 5 -r 1 base = 7\nbase * 6");
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("of 1 run, 5 loops each"),
        "{}",
        v["text"]
    );
    let v = eval::ok(
        &d,
        "c",
        "%matplotlib inline\nfor i in range(2):\n    !echo loop {i}",
    );
    assert_eq!(v["text"], "loop 0\nloop 1\n");
    // A failing command shows its output; `_exit_code` holds its status, like IPython.
    let v = eval::ok(&d, "c", "!echo oops >&2; exit 3\n_exit_code");
    assert_eq!(v["text"], "oops\n3\n");
}

#[test]
fn pip_install_makes_a_package_importable_in_the_next_cell() {
    let d = eval::daemon("");
    // Start from a venv without it, so the import below proves the install.
    eval::ok(&d, "c", "%pip uninstall -y -q inflection");
    let v = eval::ok(
        &d,
        "c",
        "try:\n    import inflection\n    found = 'present'\nexcept ImportError:\n    found = 'absent'\nfound",
    );
    assert_eq!(v["text"], "'absent'\n");
    let v = eval::ok_with(
        &d,
        "c",
        args("%pip install inflection", json!({"timeout_s": 300})),
    );
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("Successfully installed inflection"), "{text}");
    let v = eval::ok(
        &d,
        "c",
        "import inflection\ninflection.camelize('device_type')",
    );
    assert_eq!(v["text"], "'DeviceType'\n");
}

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

/// A project under `dir` whose in-tree build backend (no setuptools, no network) builds
/// `tvpipprobe` at `version` as a pure wheel.
fn probe_project(dir: &std::path::Path, version: &str) {
    std::fs::create_dir_all(dir.join("tvpipprobe")).unwrap();
    std::fs::write(
        dir.join("pyproject.toml"),
        "[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = [\".\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("tvpipprobe/__init__.py"),
        format!("VERSION = {version:?}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("backend.py"),
        format!(
            r#"import base64, hashlib, os, zipfile
NAME, VERSION = "tvpipprobe", {version:?}
def _record(files):
    lines = []
    for path, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append("%s,sha256=%s,%d" % (path, digest, len(data)))
    return "\n".join(lines) + "\n"
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = "%s-%s.dist-info" % (NAME, VERSION)
    src = open(os.path.join(os.path.dirname(__file__), NAME, "__init__.py"), "rb").read()
    files = [
        (NAME + "/__init__.py", src),
        (info + "/METADATA", ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (NAME, VERSION)).encode()),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: tv\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    files.append((info + "/RECORD", (_record(files) + info + "/RECORD,,\n").encode()))
    name = "%s-%s-py3-none-any.whl" % (NAME, VERSION)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, data in files:
            z.writestr(path, data)
    return name
"#
        ),
    )
    .unwrap();
}

#[test]
fn pip_install_of_a_path_or_a_wheel_file_loads_the_new_version_next_cell() {
    let d = eval::daemon("");
    let dir = d.dir.path().join("pipwork");
    let project = dir.join("pkg");
    probe_project(&project, "1.0");
    let pip = |cell: &str| {
        let v = eval::ok_with(&d, "c", args(cell, json!({"timeout_s": 300})));
        let text = v["text"].as_str().unwrap().to_string();
        assert!(!text.contains("pip exited with code"), "{cell}: {text}");
        text
    };
    pip("%pip uninstall -y -q tvpipprobe");
    eval::ok(&d, "c", &format!("%cd {}", dir.display()));
    pip("%pip install -q --no-build-isolation ./pkg");
    let v = eval::ok(&d, "c", "import tvpipprobe\ntvpipprobe.VERSION");
    assert_eq!(v["text"], "'1.0'\n");
    // The same path at a new version: the module named by no argument must be reloaded.
    probe_project(&project, "2.0");
    pip("%pip install -q --no-build-isolation ./pkg");
    let v = eval::ok(&d, "c", "import tvpipprobe\ntvpipprobe.VERSION");
    assert_eq!(v["text"], "'2.0'\n", "the old module stayed in sys.modules");
    // A wheel file's path.
    probe_project(&project, "3.0");
    pip("%pip wheel -q --no-deps --no-build-isolation -w wheels ./pkg");
    pip("%pip install -q wheels/tvpipprobe-3.0-py3-none-any.whl");
    let v = eval::ok(&d, "c", "import tvpipprobe\ntvpipprobe.VERSION");
    assert_eq!(v["text"], "'3.0'\n");
    pip("%pip uninstall -y -q tvpipprobe");
    let v = eval::ok(
        &d,
        "c",
        "try:\n    import tvpipprobe\n    found = 'present'\nexcept ImportError:\n    found = 'absent'\nfound",
    );
    assert_eq!(v["text"], "'absent'\n");
}

//! Where gopls does not look: Go files a build constraint leaves out of this machine's build
//! — a `//go:build` line (or the older `// +build` lines) that is false here, or a file name
//! ending in another platform's `_GOOS`, `_GOARCH` or `_GOOS_GOARCH` (`pty_darwin.go`,
//! `zsyscall_windows_arm64.go`). gopls loads only the files of the host's GOOS and GOARCH, so
//! a use in such a file is neither listed nor renamed, and a rename breaks the build on the
//! other platforms. Every whole-word occurrence of the name in the code of such a file
//! (comments and literals blanked) is a candidate; the server's own locations are taken out
//! by the caller.
//!
//! A constraint is evaluated with the tags gopls builds with here: the host's GOOS and
//! GOARCH, `unix` on a Unix, `gc`, `cgo`, and every `go1.N` release tag; any other tag (a
//! custom `integration`, `ignore`) is off, as it is for gopls without `buildFlags`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::Hider;

/// GOOS values the go command knows (`go tool dist list`).
const GOOS: &[&str] = &[
    "aix",
    "android",
    "darwin",
    "dragonfly",
    "freebsd",
    "hurd",
    "illumos",
    "ios",
    "js",
    "linux",
    "nacl",
    "netbsd",
    "openbsd",
    "plan9",
    "solaris",
    "wasip1",
    "windows",
    "zos",
];

/// GOARCH values the go command knows.
const GOARCH: &[&str] = &[
    "386",
    "amd64",
    "amd64p32",
    "arm",
    "armbe",
    "arm64",
    "arm64be",
    "loong64",
    "mips",
    "mipsle",
    "mips64",
    "mips64le",
    "mips64p32",
    "mips64p32le",
    "ppc",
    "ppc64",
    "ppc64le",
    "riscv",
    "riscv64",
    "s390",
    "s390x",
    "sparc",
    "sparc64",
    "wasm",
];

/// The GOOS values the `unix` tag stands for.
const UNIX: &[&str] = &[
    "aix",
    "android",
    "darwin",
    "dragonfly",
    "freebsd",
    "hurd",
    "illumos",
    "ios",
    "linux",
    "netbsd",
    "openbsd",
    "solaris",
];

/// The host's GOOS and GOARCH, as Go names them.
fn host() -> (&'static str, &'static str) {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "x86" => "386",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64",
        "loongarch64" => "loong64",
        other => other,
    };
    (os, arch)
}

/// Whether build tag `tag` is on for a build on `os`/`arch`.
fn tag_on(tag: &str, os: &str, arch: &str) -> bool {
    tag == os
        || tag == arch
        || (tag == "unix" && UNIX.contains(&os))
        || matches!(tag, "gc" | "cgo")
        || tag
            .strip_prefix("go1.")
            .is_some_and(|n| n.parse::<u32>().is_ok())
}

/// Whether a file named `name` is in a build on `os`/`arch` by its name alone: `*_GOOS.go`,
/// `*_GOARCH.go` and `*_GOOS_GOARCH.go` (before a `_test` suffix) are only there.
fn name_fits(name: &str, os: &str, arch: &str) -> bool {
    let stem = name.strip_suffix(".go").unwrap_or(name);
    let stem = stem.strip_suffix("_test").unwrap_or(stem);
    let parts: Vec<&str> = stem.split('_').collect();
    let n = parts.len();
    if n >= 3 && GOOS.contains(&parts[n - 2]) && GOARCH.contains(&parts[n - 1]) {
        return parts[n - 2] == os && parts[n - 1] == arch;
    }
    if n >= 2 && GOOS.contains(&parts[n - 1]) {
        return parts[n - 1] == os;
    }
    if n >= 2 && GOARCH.contains(&parts[n - 1]) {
        return parts[n - 1] == arch;
    }
    true
}

/// A `//go:build` expression: `||`, `&&`, `!`, parentheses and tags. `None` when it does not
/// parse (the go command then refuses the file; it is not taken as left out).
fn eval(expr: &str, on: &dyn Fn(&str) -> bool) -> Option<bool> {
    let mut tokens = Vec::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' => i += 1,
            b'(' | b')' | b'!' => {
                tokens.push(&expr[i..i + 1]);
                i += 1;
            }
            b'&' | b'|' if b.get(i + 1) == Some(&b[i]) => {
                tokens.push(&expr[i..i + 2]);
                i += 2;
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.')
                {
                    i += 1;
                }
                tokens.push(&expr[start..i]);
            }
            _ => return None,
        }
    }
    let mut at = 0;
    let value = or(&tokens, &mut at, on)?;
    (at == tokens.len()).then_some(value)
}

fn or(t: &[&str], at: &mut usize, on: &dyn Fn(&str) -> bool) -> Option<bool> {
    let mut v = and(t, at, on)?;
    while t.get(*at) == Some(&"||") {
        *at += 1;
        v |= and(t, at, on)?;
    }
    Some(v)
}

fn and(t: &[&str], at: &mut usize, on: &dyn Fn(&str) -> bool) -> Option<bool> {
    let mut v = not(t, at, on)?;
    while t.get(*at) == Some(&"&&") {
        *at += 1;
        v &= not(t, at, on)?;
    }
    Some(v)
}

fn not(t: &[&str], at: &mut usize, on: &dyn Fn(&str) -> bool) -> Option<bool> {
    let token = *t.get(*at)?;
    *at += 1;
    match token {
        "!" => not(t, at, on).map(|v| !v),
        "(" => {
            let v = or(t, at, on)?;
            (t.get(*at) == Some(&")")).then(|| *at += 1)?;
            Some(v)
        }
        ")" | "&&" | "||" => None,
        tag => Some(on(tag)),
    }
}

/// Whether the file `name` with `text` is in a build on `os`/`arch`: its name fits, and its
/// constraint (the `//go:build` line before the package clause, else the `// +build` lines:
/// each line's space-separated options or-ed, a comma and-ing, `!` negating; the lines
/// and-ed) holds.
pub fn in_build(name: &str, text: &str, os: &str, arch: &str) -> bool {
    if !name_fits(name, os, arch) {
        return false;
    }
    let on = |tag: &str| tag_on(tag, os, arch);
    let mut plus = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("package ") {
            break;
        }
        if let Some(expr) = line.strip_prefix("//go:build ") {
            return eval(expr, &on).unwrap_or(true);
        }
        if let Some(opts) = line.strip_prefix("// +build ") {
            plus.push(opts.split_whitespace().any(|opt| {
                opt.split(',').all(|t| match t.strip_prefix('!') {
                    Some(t) => !on(t),
                    None => on(t),
                })
            }));
        }
    }
    plus.into_iter().all(|ok| ok)
}

/// Whether the Go file at `path` (holding `text`) is left out of this machine's build.
pub fn left_out(path: &Path, text: &str) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let (os, arch) = host();
    !in_build(name, text, os, arch)
}

/// Go (gopls): the uses in files a build constraint leaves out of this build.
pub struct GoHider {
    word: String,
    places: Vec<(PathBuf, u32)>,
}

impl GoHider {
    pub fn new(word: &str) -> GoHider {
        GoHider {
            word: word.to_string(),
            places: Vec::new(),
        }
    }
}

impl Hider for GoHider {
    fn file(&mut self, path: &Path, text: &str) {
        if self.word.is_empty() || !text.contains(&self.word) {
            return;
        }
        if !left_out(path, text) {
            return;
        }
        let mut in_comment = false;
        for (i, line) in text.lines().enumerate() {
            let code = super::strip(line, &mut in_comment);
            if super::has_word(&code, &self.word) {
                self.places.push((path.to_path_buf(), i as u32 + 1));
            }
        }
    }

    fn places(&mut self, _seen: &HashSet<(PathBuf, u32)>) -> Vec<(PathBuf, u32)> {
        std::mem::take(&mut self.places)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_and_constraints_decide_the_build_as_the_go_command_does() {
        let fits = |name: &str, text: &str| in_build(name, text, "linux", "amd64");
        assert!(fits("ioctl.go", "package pty\n"));
        assert!(fits("pty_linux.go", "package pty\n"));
        assert!(!fits("pty_darwin.go", "package pty\n"));
        assert!(!fits("zsys_linux_arm64.go", "package pty\n"));
        assert!(fits("zsys_linux_amd64_test.go", "package pty\n"));
        assert!(!fits("asm_386.go", "package pty\n"));
        // A name part that is no platform is just a name.
        assert!(fits("winsize_unix.go", "package pty\n"));
        let go_build = |expr: &str| fits("a.go", &format!("//go:build {expr}\n\npackage a\n"));
        assert!(go_build("!windows && !solaris && !aix"));
        assert!(go_build("linux || darwin"));
        assert!(go_build("unix && (amd64 || arm64)"));
        assert!(go_build("go1.18"));
        assert!(!go_build("darwin || freebsd"));
        assert!(!go_build("integration"));
        assert!(!go_build("!cgo"));
        assert!(
            go_build("&& broken"),
            "a constraint that does not parse is not taken as off"
        );
        // The older form: options or-ed, commas and-ed, lines and-ed.
        assert!(fits("a.go", "// +build linux darwin\n\npackage a\n"));
        assert!(!fits("a.go", "// +build linux,386\n\npackage a\n"));
        assert!(!fits(
            "a.go",
            "// +build linux\n// +build ignore\n\npackage a\n"
        ));
        // A constraint after the package clause is a comment.
        assert!(fits("a.go", "package a\n\n//go:build windows\n"));
    }

    #[test]
    fn uses_in_a_file_left_out_of_the_build_are_found() {
        let mut h = GoHider::new("ioctl");
        h.file(
            Path::new("/m/pty_linux.go"),
            "package pty\n\nfunc a() { ioctl() }\n",
        );
        h.file(
            Path::new("/m/pty_darwin.go"),
            "package pty\n\n// ioctl in a comment\nfunc b() {\n\tioctl()\n\ts := \"ioctl\"\n}\n",
        );
        h.file(
            Path::new("/m/tagged.go"),
            "//go:build integration\n\npackage pty\n\nvar f = ioctl\n",
        );
        let got = h.places(&HashSet::new());
        assert_eq!(
            got,
            vec![
                (PathBuf::from("/m/pty_darwin.go"), 5),
                (PathBuf::from("/m/tagged.go"), 5)
            ]
        );
    }
}

//! The daemon's modules import in one direction: `config` imports none
//! of the daemon's modules; `registry` neither `session`, `daemon` nor `server`; `tools` (the handlers) imports
//! neither `session`, `daemon` nor `server`; `daemon` (state and services) imports neither
//! `session` nor `server`; `outbox` does not import `session`; `session` does not import
//! `server`. The eval bridge back into the gates sits behind traits (`tools::Caller`,
//! `toolvisor_kernel::Bridge`), so no `use` is needed for it.

use std::path::{Path, PathBuf};

/// Each rule: the files under `src/` it covers (a file, or a directory's files with the
/// file of the same name), and the modules they must not name.
const RULES: &[(&str, &[&str])] = &[
    // Configuration is read by everything and reads nothing of the daemon (it
    // imported `metrics`, which imports `daemon`).
    (
        "config",
        &[
            "metrics", "daemon", "session", "server", "tools", "registry", "root",
        ],
    ),
    ("registry", &["session", "daemon", "server"]),
    ("metrics", &["session", "server"]),
    // The tools are one value each (tools/spec.rs) and the registry only rules over them.
    ("tools", &["session", "daemon", "server", "registry"]),
    ("daemon", &["session", "server"]),
    ("outbox", &["session"]),
    ("session", &["server"]),
];

fn files_of(src: &Path, module: &str) -> Vec<PathBuf> {
    let mut files = vec![src.join(format!("{module}.rs"))];
    let mut dirs = vec![src.join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.retain(|f| f.is_file());
    files
}

/// Lines of `text` (comments aside) that name `crate::<module>`.
fn naming(text: &str, module: &str) -> Vec<String> {
    let needle = format!("crate::{module}");
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .filter(|code| {
            code.match_indices(&needle).any(|(at, _)| {
                let next = code[at + needle.len()..].chars().next();
                !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
        .map(|code| code.trim().to_string())
        .collect()
}

#[test]
fn handlers_state_and_sessions_import_in_one_direction() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    for (module, forbidden) in RULES {
        let files = files_of(&src, module);
        assert!(!files.is_empty(), "no source file for module `{module}`");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for other in *forbidden {
                for line in naming(&text, other) {
                    broken.push(format!(
                        "{} names `crate::{other}`: {line}",
                        file.strip_prefix(&src).unwrap_or(&file).display()
                    ));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "imports against the dependency direction (docs/ARCHITECTURE.md):\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_rule_sees_a_path_and_not_a_longer_name_or_a_comment() {
    assert_eq!(
        naming("use crate::daemon::Daemon;", "daemon"),
        vec!["use crate::daemon::Daemon;"]
    );
    assert!(naming("use crate::daemons::X;", "daemon").is_empty());
    assert!(naming("// see crate::daemon", "daemon").is_empty());
}

//! `diagnostics` with `file: "*"`: run the project's own checker (pyright CLI, `cargo check`,
//! `tsc --noEmit`, …, configurable per language) in the project root and report its findings
//! in the same shape as a server's diagnostics.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncReadExt;
use toolvisor_kit::process;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{LspDiagnostic, LspProjectCheck};

use crate::answers::{Diag, show_path, start_of};
use crate::call::CallCtx;
use crate::locate;
use crate::servers::Servers;

const OUTPUT_MAX: usize = 32 * 1024 * 1024;
pub(crate) const SHOWN_MAX: usize = 200;

fn sev(word: &str) -> u8 {
    match word {
        "error" | "fatal" => 1,
        "warning" => 2,
        "information" | "info" | "note" => 3,
        _ => 4,
    }
}

/// Parse a checker's output in `format`.
pub fn parse(format: &str, out: &str, root: &Path) -> Vec<Diag> {
    let abs = |f: &str| {
        let p = PathBuf::from(f.strip_prefix("./").unwrap_or(f));
        if p.is_absolute() { p } else { root.join(p) }
    };
    let mut diags = Vec::new();
    match format {
        "pyright-json" => pyright_json(out, &abs, &mut diags),
        "cargo-json" => cargo_json(out, &abs, &mut diags),
        "tsc" => tsc(out, root, &abs, &mut diags),
        _ => file_line_col(out, &abs, &mut diags),
    }
    diags
}

/// `pyright --outputjson`: its `generalDiagnostics`.
fn pyright_json(out: &str, abs: &dyn Fn(&str) -> PathBuf, diags: &mut Vec<Diag>) {
    let v: Value = serde_json::from_str(out).unwrap_or(Value::Null);
    for d in v["generalDiagnostics"].as_array().into_iter().flatten() {
        let (line0, column0) = start_of(d.get("range"));
        diags.push(Diag {
            path: abs(d["file"].as_str().unwrap_or("")),
            line: line0 + 1,
            column: column0 as usize + 1,
            severity: sev(d["severity"].as_str().unwrap_or("error")),
            code: d["rule"].as_str().unwrap_or("").to_string(),
            message: d["message"].as_str().unwrap_or("").to_string(),
            source: "pyright".into(),
            at: String::new(),
        });
    }
}

/// `cargo check --message-format=json`: each compiler message at its primary span.
fn cargo_json(out: &str, abs: &dyn Fn(&str) -> PathBuf, diags: &mut Vec<Diag>) {
    for line in out.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v["reason"] != "compiler-message" {
            continue;
        }
        let m = &v["message"];
        let Some(span) = m["spans"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["is_primary"] == true))
        else {
            continue;
        };
        diags.push(Diag {
            path: abs(span["file_name"].as_str().unwrap_or("")),
            line: span["line_start"].as_u64().unwrap_or(1) as usize,
            column: span["column_start"].as_u64().unwrap_or(1) as usize,
            severity: sev(m["level"].as_str().unwrap_or("error")),
            code: m
                .pointer("/code/code")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            message: m["message"].as_str().unwrap_or("").to_string(),
            source: "cargo".into(),
            at: String::new(),
        });
    }
}

/// `tsc --noEmit --pretty false`.
fn tsc(out: &str, root: &Path, abs: &dyn Fn(&str) -> PathBuf, diags: &mut Vec<Diag>) {
    // src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.
    // An error of no file (`error TS2318: Cannot find global type '…'.`: the
    // project's lib or types) stands at the project's tsconfig.json, line 1.
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("error TS") {
            let (code, message) = rest.split_once(": ").unwrap_or((rest, ""));
            diags.push(Diag {
                path: root.join("tsconfig.json"),
                line: 1,
                column: 1,
                severity: 1,
                code: format!("TS{code}"),
                message: message.to_string(),
                source: "tsc".into(),
                at: String::new(),
            });
            continue;
        }
        let Some((loc, rest)) = line.split_once("): ") else {
            continue;
        };
        let Some((file, lc)) = loc.rsplit_once('(') else {
            continue;
        };
        let mut nums = lc
            .split(',')
            .map(|n| n.trim().parse::<usize>().unwrap_or(1));
        let (l, c) = (nums.next().unwrap_or(1), nums.next().unwrap_or(1));
        let (head, message) = rest.split_once(": ").unwrap_or((rest, ""));
        let mut words = head.split_whitespace();
        let level = words.next().unwrap_or("error");
        diags.push(Diag {
            path: abs(file),
            line: l,
            column: c,
            severity: sev(level),
            code: words.next().unwrap_or("").to_string(),
            message: message.to_string(),
            source: "tsc".into(),
            at: String::new(),
        });
    }
}

/// The compilers' `file:line:col: severity: message` lines (gcc, clang, go vet).
fn file_line_col(out: &str, abs: &dyn Fn(&str) -> PathBuf, diags: &mut Vec<Diag>) {
    // file:line:col: severity: message (gcc, clang), or file:line:col: message (go
    // vet: an analyzer's finding, a warning, and a type error it prefixes with `vet: `,
    // an error).
    for line in out.lines() {
        // A message's further lines (go's `have (…)`/`want (…)`) are indented by a
        // tab: they belong to the one before.
        if line.starts_with('\t')
            && let Some(last) = diags.last_mut()
            && !line.trim().is_empty()
        {
            last.message.push('\n');
            last.message.push_str(line.trim());
            continue;
        }
        let (line, unmarked) = match line.strip_prefix("vet: ") {
            Some(rest) => (rest, 1),
            None => (line, 2),
        };
        let parts: Vec<&str> = line.splitn(4, ':').collect();
        if parts.len() < 4 {
            continue;
        }
        let (Ok(l), Ok(c)) = (
            parts[1].trim().parse::<usize>(),
            parts[2].trim().parse::<usize>(),
        ) else {
            continue;
        };
        let rest = parts[3].trim();
        let (severity, message) = match rest.split_once(':') {
            Some((word, message)) if sev(word.trim()) < 4 => (sev(word.trim()), message),
            _ => (unmarked, rest),
        };
        diags.push(Diag {
            path: abs(parts[0]),
            line: l,
            column: c,
            severity,
            code: String::new(),
            message: message.trim().to_string(),
            source: String::new(),
            at: String::new(),
        });
    }
}

impl Servers {
    /// Run the checker of the first language whose root is found from the workdir and whose
    /// checker binary resolves. A checker that executes project code (`cargo check` runs
    /// build scripts) runs only where the calling run trusts the root; otherwise the call is
    /// refused (`policy_denied`) naming what would run and how to trust the root.
    pub async fn project_check(&self, ctx: &CallCtx) -> Result<LspProjectCheck, ToolError> {
        let mut reasons = Vec::new();
        let mut withheld: Option<ToolError> = None;
        for (language, spec) in self.languages() {
            let Some(cmd) = spec.checker.clone().filter(|c| !c.is_empty()) else {
                continue;
            };
            let Some(root) = locate::find_root(&ctx.workdir, &spec.markers) else {
                continue;
            };
            let trust = self.trust.check(&root, &ctx.run);
            if spec.checker_runs_project_code && !trust.trusted() {
                tracing::info!(
                    language,
                    root = %root.display(),
                    run = ctx.run,
                    "project checker withheld: untrusted root"
                );
                withheld.get_or_insert_with(|| untrusted_checker(language, &cmd, &root, &ctx.run));
                continue;
            }
            let probe = crate::config::LanguageSpec {
                servers: vec![cmd.clone()],
                ..spec.clone()
            };
            let path_var = self.launcher_path();
            let resolved = match locate::resolve_binary(
                &probe,
                &root,
                &self.config.search_path,
                &path_var,
                trust.trusted(),
            ) {
                Ok(r) => r,
                Err(e) => {
                    reasons.push(format!("{language}: checker {e}"));
                    continue;
                }
            };
            let format = spec.checker_format.clone().unwrap_or_else(|| "gcc".into());
            let mut args = cmd[1..].to_vec();
            if format == "tsc" {
                tsc_project(&root, &mut args, &cmd)?;
            }
            let run = self.run_checker(&resolved.program, &args, &root).await?;
            return checker_answer(ctx, &cmd, &args, &format, &root, run);
        }
        if let Some(refusal) = withheld {
            return Err(refusal);
        }
        Err(ToolError::new(
            ErrorKind::NotAvailable,
            format!(
                "no project checker runs here{}",
                if reasons.is_empty() {
                    " (no language's root marker found from the workdir)".into()
                } else {
                    format!(": {}", reasons.join("; "))
                }
            ),
            "configure [lsp.languages.<name>] checker, or ask for one file's diagnostics",
        ))
    }

    async fn run_checker(
        &self,
        program: &Path,
        args: &[String],
        root: &Path,
    ) -> Result<CheckerRun, ToolError> {
        let io = |m: String| ToolError::new(ErrorKind::Io, m, "check the checker command");
        let spec = self.launcher().spec(
            &program.display().to_string(),
            args,
            root,
            false,
            "lsp/checker",
        );
        let spawned = process::spawn(spec)
            .await
            .map_err(|e| io(format!("cannot start the checker: {e}")))?;
        let _guard = spawned.guard;
        let mut stdout = spawned.stdout;
        let mut stderr = spawned.stderr;
        let mut exit = spawned.exit;
        let timeout = Duration::from_secs(self.config.checker_timeout_s);
        let run = async {
            let mut out = Vec::new();
            let mut err = Vec::new();
            // Past each cap the rest is drained and dropped: a checker blocked on a full
            // pipe would otherwise sit there until the timeout.
            let (discarded, _) = tokio::join!(
                read_capped(&mut stdout, OUTPUT_MAX, &mut out),
                read_capped(&mut stderr, 1 << 20, &mut err)
            );
            let status = exit.wait_for(|s| s.is_some()).await.ok().and_then(|s| *s);
            (out, err, status, discarded)
        };
        match tokio::time::timeout(timeout, run).await {
            Ok((out, err, status, discarded)) => Ok(CheckerRun {
                out: String::from_utf8_lossy(&out).into_owned(),
                err: String::from_utf8_lossy(&err).into_owned(),
                success: status.is_some_and(|s| s.success()),
                status: status
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "unknown exit".into()),
                discarded,
            }),
            Err(_) => Err(ToolError::new(
                ErrorKind::Timeout,
                format!(
                    "the checker ran longer than {} s and was killed",
                    timeout.as_secs()
                ),
                "raise [lsp] checker_timeout_s, or check single files",
            )),
        }
    }
}

/// The answer of `diagnostics "*"` from the checker's `run` (`cmd` with `args`, its output
/// read as `format`) in `root`: its diagnostics, at most [`SHOWN_MAX`], or why it did not
/// check.
fn checker_answer(
    ctx: &CallCtx,
    cmd: &[String],
    args: &[String],
    format: &str,
    root: &Path,
    run: CheckerRun,
) -> Result<LspProjectCheck, ToolError> {
    let (out, status, discarded) = (run.out, run.status, run.discarded);
    let mut diags = parse(format, &out, root);
    if format == "gcc" {
        // Compilers and `go vet` write their findings to stderr.
        diags.extend(parse(format, &run.err, root));
    }
    let shown_cmd = format!("{} {}", cmd[0], args.join(" "));
    if !run.success && diags.is_empty() && discarded == 0 {
        // A failing checker that reported nothing did not check (tsc printing its
        // help, a broken config): never "no diagnostics".
        return Err(ToolError::new(
            ErrorKind::ResourceFailed,
            format!(
                "`{shown_cmd}` in {} ended with {status} and reported no diagnostics: it did not check the project. Its output: {}",
                root.display(),
                output_head(&out, &run.err)
            ),
            "fix what the output names (the checker's config), or check single files with `lsp diagnostics`",
        ));
    }
    if discarded > 0 && diags.is_empty() {
        // Not "no diagnostics": the output that would hold them was not read whole.
        return Err(ToolError::new(
            ErrorKind::Io,
            format!(
                "`{}` wrote more than {} MiB; the rest ({discarded} bytes) was not read, and no diagnostics could be parsed from the part that was",
                cmd.join(" "),
                OUTPUT_MAX >> 20
            ),
            "check single files with `lsp diagnostics`, or narrow the checker's scope in [lsp.languages.<name>] checker",
        ));
    }
    diags.sort_by(|a, b| (&a.path, a.line, a.column).cmp(&(&b.path, b.line, b.column)));
    let total = diags.len();
    let items: Vec<LspDiagnostic> = diags
        .iter()
        .take(SHOWN_MAX)
        .map(|d| d.to_result(&ctx.workdir))
        .collect();
    let mut text: String = items.iter().map(|d| d.line() + "\n").collect();
    if total == 0 {
        text = format!("{shown_cmd}: no diagnostics ({status})\n");
    } else if total > SHOWN_MAX {
        text.push_str(&format!("(showing {SHOWN_MAX} of {total})\n"));
    }
    if discarded > 0 {
        text.push_str(&format!(
            "(the checker wrote more than {} MiB: {discarded} bytes were not read, so this list may be incomplete)\n",
            OUTPUT_MAX >> 20
        ));
    }
    let shown_root = match show_path(root, &ctx.workdir) {
        r if r.is_empty() => ".".to_string(),
        r => r,
    };
    // `go vet` type-checks each package and stops at its first type error.
    let stopped = cmd.iter().any(|c| c == "vet") && run.err.lines().any(|l| l.starts_with("vet: "));
    let mut partial_reason = None;
    if stopped {
        // Its own line says "no diagnostics" and the reason says there may be more: not
        // "the server found none" (a checker answered).
        crate::coverage::mark_partial(
            &mut text,
            false,
            &mut partial_reason,
            Some(
                "go vet stops at the first type error of each package, so a package may have more: `go build -gcflags=-e ./...` lists them all, or ask `lsp diagnostics` of its files".into(),
            ),
        );
    }
    Ok(LspProjectCheck {
        text,
        checker: shown_cmd,
        root: shown_root,
        exit: status,
        total: total as u64,
        output_truncated: discarded > 0,
        diagnostics: items,
        complete: stopped.then_some(false),
        partial_reason,
        source: None,
        source_reason: None,
    })
}

/// What a checker run gave.
struct CheckerRun {
    out: String,
    err: String,
    status: String,
    success: bool,
    /// Bytes of stdout past the cap, not read.
    discarded: u64,
}

/// The first lines of a checker's output (stdout, else stderr), for an error.
fn output_head(out: &str, err: &str) -> String {
    let text = if out.trim().is_empty() { err } else { out };
    let head: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(6)
        .collect();
    if head.is_empty() {
        "(none)".into()
    } else {
        head.join(" | ").chars().take(600).collect()
    }
}

/// `tsc` checks a project only from a `tsconfig.json` (given none, it prints its help and
/// exits 1, checking nothing): the root's `jsconfig.json` is passed as the project where
/// there is no `tsconfig.json`; with neither, the check is refused naming why.
fn tsc_project(root: &Path, args: &mut Vec<String>, cmd: &[String]) -> Result<(), ToolError> {
    if root.join("tsconfig.json").is_file() || args.iter().any(|a| a == "-p" || a == "--project") {
        return Ok(());
    }
    if root.join("jsconfig.json").is_file() {
        args.extend(["-p".to_string(), "jsconfig.json".to_string()]);
        return Ok(());
    }
    Err(ToolError::new(
        ErrorKind::NotAvailable,
        format!(
            "`{}` needs a tsconfig.json or jsconfig.json in {} and there is none (the root was found by its package.json): without one tsc prints its help and checks nothing",
            cmd.join(" "),
            root.display()
        ),
        "add a tsconfig.json (`tsc --init`) or jsconfig.json to the root, or check single files with `lsp diagnostics`",
    ))
}

/// Read `reader` to its end, keeping the first `cap` bytes in `buf` and dropping the rest;
/// returns how many bytes were dropped.
async fn read_capped<R: tokio::io::AsyncRead + Unpin>(
    reader: &mut R,
    cap: usize,
    buf: &mut Vec<u8>,
) -> u64 {
    let _ = (&mut *reader).take(cap as u64).read_to_end(buf).await;
    tokio::io::copy(reader, &mut tokio::io::sink())
        .await
        .unwrap_or(0)
}

/// The refusal of a checker that would execute an untrusted root's code.
fn untrusted_checker(language: &str, cmd: &[String], root: &Path, run: &str) -> ToolError {
    ToolError::new(
        ErrorKind::PolicyDenied,
        format!(
            "{language}: not running `{}` in {}: the root is untrusted for run {run}, and the checker executes project code (build scripts, plugins); a read call never runs project code in an untrusted root",
            cmd.join(" "),
            root.display()
        ),
        format!(
            "to trust the root: `lsp {{\"op\":\"trust\"}}` (the user approves \"trust {}?\"; for this run), or add it to [trust] roots in the daemon config; meanwhile `lsp diagnostics` of single files works untrusted",
            root.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_format() {
        let root = Path::new("/r");
        let py = r#"{"generalDiagnostics":[{"file":"/r/a.py","severity":"error","message":"x is not defined","range":{"start":{"line":2,"character":4}},"rule":"reportUndefinedVariable"}]}"#;
        let d = parse("pyright-json", py, root);
        assert_eq!(
            (d[0].line, d[0].column, d[0].code.as_str()),
            (3, 5, "reportUndefinedVariable")
        );
        let tsc = "src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.";
        let d = parse("tsc", tsc, root);
        assert_eq!(
            (d[0].path.as_path(), d[0].line, d[0].code.as_str()),
            (Path::new("/r/src/a.ts"), 3, "TS2322")
        );
        let cargo = r#"{"reason":"compiler-message","message":{"level":"error","message":"mismatched types","code":{"code":"E0308"},"spans":[{"file_name":"src/main.rs","line_start":4,"column_start":9,"is_primary":true}]}}"#;
        let d = parse("cargo-json", cargo, root);
        assert_eq!(
            (d[0].line, d[0].code.as_str(), d[0].severity),
            (4, "E0308", 1)
        );
        let d = parse("gcc", "main.go:3:2: error: undefined: x", root);
        assert_eq!(
            (d[0].line, d[0].message.as_str(), d[0].severity),
            (3, "undefined: x", 1)
        );
        // go vet, as it prints: a package header, a finding with no severity (a warning), a
        // type error after `vet: ` (an error), a message holding a colon.
        let vet = "# example.com/m\n./flag_test.go:1242:3: fmt.Println arg list ends with redundant newline\nvet: ./a.go:3:2: undefined: fmt\n./b.go:7:9: printf: Sprintf format %d has arg s of wrong type string\n";
        let d = parse("gcc", vet, root);
        let got: Vec<(usize, &str, u8)> = d
            .iter()
            .map(|d| (d.line, d.message.as_str(), d.severity))
            .collect();
        assert_eq!(
            got,
            vec![
                (1242, "fmt.Println arg list ends with redundant newline", 2),
                (3, "undefined: fmt", 1),
                (
                    7,
                    "printf: Sprintf format %d has arg s of wrong type string",
                    2
                ),
            ]
        );
        assert_eq!(d[1].path, Path::new("/r/a.go"));
        // A type error's further lines go with it.
        let d = parse(
            "gcc",
            "vet: ./hash.go:15:68: not enough arguments in call to Must\n\thave (UUID, error)\n\twant (UUID, error, int)\n",
            root,
        );
        assert_eq!(d.len(), 1);
        assert_eq!(
            d[0].message,
            "not enough arguments in call to Must\nhave (UUID, error)\nwant (UUID, error, int)"
        );
        // tsc's error of no file: at the project's tsconfig.json.
        let d = parse(
            "tsc",
            "error TS2318: Cannot find global type 'AsyncIterableIterator'.\nsrc/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\n",
            root,
        );
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(
            (d[0].path.as_path(), d[0].line, d[0].code.as_str()),
            (Path::new("/r/tsconfig.json"), 1, "TS2318")
        );
    }
}

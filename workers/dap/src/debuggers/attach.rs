//! `debug attach`: to a debug server on a loopback port (`python -m debugpy --listen`), or to
//! a running process by its id — a Python program through debugpy (whose adapter injects
//! itself with gdb), any other through lldb-dap (ptrace).
//!
//! A process is attachable only inside the boundary: it runs as the daemon's user, its
//! working directory is in the workdir, it is neither the daemon nor one of its ancestors,
//! and the kernel lets this user ptrace it (`kernel.yama.ptrace_scope`: 0 for anyone, 1 or 2
//! only with `CAP_SYS_PTRACE`, since the adapter is not the process's ancestor; 3 never).
//! Each refusal names its reason and what to do. `terminate` detaches and leaves the
//! process running.

use super::*;

/// What `attach {pid}` found out about the process before attaching.
#[derive(Debug)]
pub(crate) struct Attachable {
    /// Its executable, as `/proc/PID/exe` names it.
    pub exe: PathBuf,
}

impl Debuggers {
    pub(super) async fn attach(
        &self,
        call: &DebugCall,
        slot: &Arc<Slot>,
        args: &DebugArgs,
    ) -> Result<DebugLaunchResult, ToolError> {
        self.refuse_second(slot, "attach")?;
        match (args.port, args.pid) {
            (Some(_), Some(_)) => {
                return Err(err(
                    ErrorKind::InvalidArgs,
                    "debug attach: give `port` or `pid`, not both",
                    "`port` attaches to a debug server on 127.0.0.1; `pid` to a running process",
                ));
            }
            (None, Some(pid)) => return self.attach_pid(call, slot, args, pid).await,
            (None, None) => {
                return Err(err(
                    ErrorKind::InvalidArgs,
                    "debug attach: missing `port` or `pid`",
                    "`port` attaches to `python -m debugpy --listen PORT`; `pid` to a running process of yours in the workdir",
                ));
            }
            (Some(_), None) => {}
        }
        let port = need("attach", "port", &args.port)?;
        let port = u16::try_from(port).ok().filter(|p| *p > 0).ok_or_else(|| {
            err(
                ErrorKind::InvalidArgs,
                format!("debug attach: port {port} is not a TCP port"),
                "ports are 1..=65535",
            )
        })?;
        let name = args.adapter.clone().unwrap_or_else(|| "debugpy".into());
        if Flavor::of(&name) != Flavor::Debugpy {
            return Err(err(
                ErrorKind::InvalidArgs,
                format!(
                    "debug attach: attaching by port is supported for debugpy only, not {name:?}"
                ),
                "start the program as `python -m debugpy --listen PORT --wait-for-client prog.py` and attach to PORT, or attach by `pid`",
            ));
        }
        let session = self
            .start_session(
                call,
                slot,
                &name,
                Flavor::Debugpy,
                Target::Attach { port },
                format!("127.0.0.1:{port}"),
                Connect::Tcp { port },
            )
            .await?;
        // `redirectOutput`: the program's output comes as events too. (debugpy refuses an
        // attach with no arguments at all.)
        let request = json!({"redirectOutput": true});
        let expect_stop = !slot.nothing_set();
        self.handshake(&session, slot, "attach", request, expect_stop)
            .await
    }

    async fn attach_pid(
        &self,
        call: &DebugCall,
        slot: &Arc<Slot>,
        args: &DebugArgs,
        pid: u64,
    ) -> Result<DebugLaunchResult, ToolError> {
        let pid = u32::try_from(pid).map_err(|_| {
            err(
                ErrorKind::InvalidArgs,
                format!("debug attach: {pid} is not a process id"),
                "`pid` is a process id as `ps` shows it",
            )
        })?;
        let found = attachable(pid, &call.workdir, &self.config.ptrace_scope_file)?;
        let (name, spec) = self.pid_adapter(args, &found.exe)?;
        let flavor = Flavor::of(name);
        let request = self.pid_request(call, args, pid, name, flavor).await?;
        let search = self.search(&call.workdir, &call.workdir);
        let resolved = adapters::resolve(name, spec, &search).map_err(|why| {
            err(
                ErrorKind::NotAvailable,
                format!("debug attach: the {name} adapter cannot run here: {why}"),
                "install it (scripts/install-test-deps installs debugpy, lldb-dap and delve), or point `[debug] search_path` at it; `adapters` shows what works",
            )
        })?;
        let command = resolved.command_line();
        let connect = Connect::Spawn {
            resolved: Box::new(resolved),
            cwd: call.workdir.clone(),
            launcher: self.launcher.clone(),
            address_wait: self.config.start_timeout(),
        };
        let session = self
            .start_session(
                call,
                slot,
                name,
                flavor,
                Target::AttachPid { pid },
                command,
                connect,
            )
            .await?;
        self.attach_watching(&session, slot, pid, request).await
    }

    /// The adapter that attaches to the process running `exe`: the one named, else debugpy
    /// for a Python interpreter and lldb for anything else.
    fn pid_adapter(
        &self,
        args: &DebugArgs,
        exe: &Path,
    ) -> Result<(&String, &AdapterSpec), ToolError> {
        let python = exe
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("python"));
        let name = match &args.adapter {
            Some(name) => name.clone(),
            None if python => "debugpy".into(),
            None => "lldb".into(),
        };
        let Some(found) = self.adapters.get_key_value(&name) else {
            return Err(err(
                ErrorKind::InvalidArgs,
                format!("debug attach: no adapter named {name:?}"),
                format!(
                    "adapters here: {}",
                    self.adapters.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        };
        Ok(found)
    }

    /// The `attach` request's arguments for process `pid` with the adapter `name`, refused
    /// for an adapter that cannot attach by pid here or an option it does not take.
    async fn pid_request(
        &self,
        call: &DebugCall,
        args: &DebugArgs,
        pid: u32,
        name: &str,
        flavor: Flavor,
    ) -> Result<Map<String, Value>, ToolError> {
        let mut request = Map::new();
        match flavor {
            Flavor::Debugpy => {
                // debugpy's adapter attaches by running gdb against the process.
                if !self.launcher.finds("gdb") {
                    return Err(err(
                        ErrorKind::NotAvailable,
                        format!(
                            "debug attach: debugpy attaches to process {pid} with gdb, which is not on the adapters' PATH"
                        ),
                        "install gdb (`apt-get install gdb`; scripts/install-test-deps does), or start the program under `python -m debugpy --listen PORT` and attach by `port`",
                    ));
                }
                // It injects by making gdb call into the process; some hosts (virtual
                // machines that do not let a tracer write the FPU's extended state) refuse
                // that, and the adapter then answers nothing for its whole start timeout
                // (and the target may die of the interrupted call). Ask first.
                if let Err(why) = self.gdb_can_call(&call.workdir).await {
                    return Err(err(
                        ErrorKind::NotAvailable,
                        format!(
                            "debug attach: debugpy attaches to process {pid} by making gdb call into it, and gdb cannot call into a process on this host: {why}"
                        ),
                        "make the program listen instead: add `import debugpy; debugpy.listen(5678)` at its start (or run it as `python -m debugpy --listen 5678 prog.py`), then `attach` with `port: 5678`",
                    ));
                }
                request.insert("processId".into(), json!(pid));
                if let Some(mine) = args.just_my_code {
                    request.insert("justMyCode".into(), json!(mine));
                }
            }
            Flavor::Lldb => {
                request.insert("pid".into(), json!(pid));
            }
            _ => {
                return Err(err(
                    ErrorKind::NotAvailable,
                    format!(
                        "debug attach: attaching to a process by pid is supported for debugpy and lldb, not {name:?}"
                    ),
                    "leave `adapter` out: a Python process goes to debugpy, any other to lldb",
                ));
            }
        }
        if flavor != Flavor::Debugpy && args.just_my_code.is_some() {
            return Err(err(
                ErrorKind::NotAvailable,
                format!("debug attach: the {name} adapter does not support `just_my_code`"),
                "`just_my_code` is debugpy's (Python)",
            ));
        }
        Ok(request)
    }

    /// The attach handshake, given up (and the session ended) when process `pid` exits
    /// before it is done.
    async fn attach_watching(
        &self,
        session: &Arc<Session>,
        slot: &Arc<Slot>,
        pid: u32,
        request: Map<String, Value>,
    ) -> Result<DebugLaunchResult, ToolError> {
        let expect_stop = !slot.nothing_set();
        let handshake =
            self.handshake(session, slot, "attach", Value::Object(request), expect_stop);
        // The target is not the daemon's child: its end is seen in /proc, not by a wait.
        let died = async {
            while process::alive(pid) {
                tokio::time::sleep(TARGET_POLL).await;
            }
        };
        tokio::select! {
            answer = handshake => match answer {
                Err(e) if !process::alive(pid) => Err(target_died(pid, &e.message)),
                answer => answer,
            },
            () = died => {
                if session.is_live() {
                    session
                        .shutdown(EndKind::Failed, format!("process {pid} exited during the attach"))
                        .await;
                }
                Err(target_died(pid, "the attach was under way"))
            }
        }
    }

    /// Whether gdb can call a function inside a process here, found once per daemon by
    /// trying it on a throwaway `sleep` (through the launcher, so with the adapters' `PATH`
    /// and under the shim): `Err` says what gdb said.
    async fn gdb_can_call(&self, workdir: &Path) -> Result<(), String> {
        self.gdb_calls
            .get_or_init(|| gdb_call_probe(&self.launcher, workdir))
            .await
            .clone()
    }
}

/// How often a process being attached to is checked for having exited.
const TARGET_POLL: Duration = Duration::from_millis(200);

/// The answer when the process being attached to exits before the attach is done.
fn target_died(pid: u32, during: &str) -> ToolError {
    err(
        ErrorKind::ResourceFailed,
        format!(
            "debug attach: process {pid} exited during the attach ({during}); it is not the daemon's child, so its exit status cannot be read here"
        ),
        "the injection may have killed it: start the program again, and prefer `debugpy.listen(PORT)` in the program with `attach {port}`, or `launch` it under the debugger",
    )
}

/// The shell script of the gdb probe: a throwaway `sleep`, gdb attached to it calling
/// `getpid()`, and the `sleep`'s pid printed so the answer can be checked.
const GDB_PROBE: &str = r#"sleep 60 & p=$!
gdb -nx -batch -iex 'set debuginfod enabled off' -p "$p" -ex 'call (int)getpid()' 2>&1
echo "probe-pid=$p"
kill "$p" 2>/dev/null
"#;

/// The longest the gdb probe may take (gdb reads the target's symbols first).
const GDB_PROBE_BUDGET: Duration = Duration::from_secs(20);

/// Runs [`GDB_PROBE`] and reads its output: `Ok` when gdb printed the `sleep`'s pid as the
/// call's value.
async fn gdb_call_probe(launcher: &Launcher, workdir: &Path) -> Result<(), String> {
    let spec = launcher.spec(
        "sh",
        &["-c".into(), GDB_PROBE.into()],
        workdir,
        false,
        "debug/gdb-probe",
    );
    let mut spawned = process::spawn(spec)
        .await
        .map_err(|e| format!("the gdb probe could not start: {e}"))?;
    let mut out = Vec::new();
    let finished = tokio::time::timeout(GDB_PROBE_BUDGET, async {
        let _ = spawned.stdout.read_to_end(&mut out).await;
        let _ = spawned.exit.wait_for(Option::is_some).await;
    })
    .await;
    drop(spawned.guard);
    if finished.is_err() {
        return Err(format!(
            "gdb did not finish calling into a throwaway process within {} s",
            GDB_PROBE_BUDGET.as_secs()
        ));
    }
    gdb_probe_verdict(&String::from_utf8_lossy(&out))
}

/// The probe's verdict from its output: the call's value must be the probed pid.
fn gdb_probe_verdict(out: &str) -> Result<(), String> {
    let pid = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("probe-pid="))
        .unwrap_or("");
    let called = !pid.is_empty()
        && out.lines().any(|l| {
            l.trim()
                .strip_prefix('$')
                .and_then(|rest| rest.split_once(" = "))
                .is_some_and(|(_, value)| value.trim() == pid)
        });
    if called {
        return Ok(());
    }
    let telling = out
        .lines()
        .map(str::trim)
        .find(|l| {
            [
                "Couldn't",
                "Cannot",
                "cannot",
                "not permitted",
                "No such",
                "not found",
            ]
            .iter()
            .any(|w| l.contains(w))
        })
        .or_else(|| {
            out.lines()
                .map(str::trim)
                .rfind(|l| !l.is_empty() && !l.starts_with("probe-pid="))
        })
        .unwrap_or("it printed nothing");
    Err(format!(
        "gdb's call of getpid() in a throwaway process failed ({telling})"
    ))
}

/// The checks `attach {pid}` makes before anything runs: the process exists and has not
/// exited, it is not the daemon or an ancestor of it, it runs as this user in `workdir`, and
/// ptrace is allowed (read from `scope_file`).
pub(crate) fn attachable(
    pid: u32,
    workdir: &Path,
    scope_file: &Path,
) -> Result<Attachable, ToolError> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let status = std::fs::read_to_string(proc_dir.join("status")).map_err(|_| {
        err(
            ErrorKind::NotFound,
            format!("debug attach: no process {pid}"),
            "`pid` must be a running process (`process list` shows this conversation's)",
        )
    })?;
    let field = |text: &str, key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    if field(&status, "State:").starts_with('Z') {
        return Err(err(
            ErrorKind::NotFound,
            format!("debug attach: process {pid} has exited (a zombie waiting for its parent)"),
            "attach to a process that is still running",
        ));
    }
    let mut ancestor = std::process::id();
    for _ in 0..4096 {
        if ancestor == pid {
            return Err(err(
                ErrorKind::PolicyDenied,
                format!("debug attach: process {pid} is the daemon or one of its ancestors"),
                "attach to a program of the project, not to toolvisor or what runs it",
            ));
        }
        match parent_of(ancestor) {
            Some(parent) if parent > 0 => ancestor = parent,
            _ => break,
        }
    }
    let own = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = |text: &str| {
        field(text, "Uid:")
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string()
    };
    if uid(&status) != uid(&own) {
        return Err(err(
            ErrorKind::PolicyDenied,
            format!(
                "debug attach: process {pid} runs as uid {}, not as the daemon's user (uid {})",
                uid(&status),
                uid(&own)
            ),
            "only this user's processes can be attached to",
        ));
    }
    let cwd = std::fs::read_link(proc_dir.join("cwd")).map_err(|e| {
        err(
            ErrorKind::PolicyDenied,
            format!("debug attach: cannot see where process {pid} runs: {e}"),
            "attach to a process of this user that runs in the workdir",
        )
    })?;
    let root = std::fs::canonicalize(workdir).unwrap_or_else(|_| workdir.to_path_buf());
    if !cwd.starts_with(&root) {
        return Err(err(
            ErrorKind::OutOfScope,
            format!(
                "debug attach: process {pid} runs in {}, outside the workdir {}",
                cwd.display(),
                root.display()
            ),
            "attach to a program that runs in the workdir (started there, e.g. with `process start`)",
        ));
    }
    ptrace_allowed(pid, scope_file, &own)?;
    let exe = std::fs::read_link(proc_dir.join("exe")).unwrap_or_default();
    Ok(Attachable { exe })
}

/// Whether the kernel lets the adapter (a child of the daemon, not an ancestor of `pid`)
/// ptrace `pid`; `own_status` is the daemon's `/proc/self/status`.
fn ptrace_allowed(pid: u32, scope_file: &Path, own_status: &str) -> Result<(), ToolError> {
    let Ok(text) = std::fs::read_to_string(scope_file) else {
        // No Yama: same user is enough.
        return Ok(());
    };
    let scope = text.trim();
    let cap_sys_ptrace = own_status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 19) != 0);
    let allowed = match scope {
        "0" => true,
        "1" | "2" => cap_sys_ptrace,
        _ => false,
    };
    if allowed {
        return Ok(());
    }
    let why = match scope {
        "1" => "only a process's ancestors may ptrace it, and the adapter is not an ancestor of it"
            .to_string(),
        "2" => "only a process with CAP_SYS_PTRACE may ptrace".to_string(),
        "3" => "no process may ptrace another".to_string(),
        other => format!("an unknown setting {other:?}"),
    };
    Err(err(
        ErrorKind::NotAvailable,
        format!(
            "debug attach: ptrace is not allowed here: kernel.yama.ptrace_scope is {scope} ({why}), so no adapter can attach to process {pid}",
        ),
        if scope == "3" {
            "ptrace_scope 3 lasts until reboot; start the program under the debugger instead (`launch`, or `python -m debugpy --listen PORT` and attach by `port`)".to_string()
        } else {
            "an administrator can allow it with `sysctl kernel.yama.ptrace_scope=0`, or give the daemon CAP_SYS_PTRACE; else `launch` the program under the debugger".to_string()
        },
    ))
}

/// The parent of `pid`, from `/proc/PID/stat` (the field after the command's closing paren).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope_file(dir: &tempfile::TempDir, value: &str) -> PathBuf {
        let path = dir.path().join("ptrace_scope");
        std::fs::write(&path, value).unwrap();
        path
    }

    #[test]
    fn the_daemon_itself_another_directory_and_no_process_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let open = scope_file(&dir, "0\n");
        let here = std::env::current_dir().unwrap();
        let e = attachable(std::process::id(), &here, &open).unwrap_err();
        assert_eq!(e.kind, ErrorKind::PolicyDenied, "{e:?}");
        assert!(
            e.message.contains("the daemon or one of its ancestors"),
            "{e:?}"
        );
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(dir.path())
            .spawn()
            .unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let e = attachable(child.id(), elsewhere.path(), &open).unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfScope, "{e:?}");
        assert!(e.message.contains("outside the workdir"), "{e:?}");
        let ok = attachable(child.id(), dir.path(), &open).unwrap();
        assert!(ok.exe.ends_with("sleep"), "{ok:?}");
        // Yama's strictest setting refuses even root, naming the setting.
        let closed = scope_file(&dir, "3\n");
        let e = attachable(child.id(), dir.path(), &closed).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotAvailable, "{e:?}");
        assert!(e.message.contains("ptrace_scope is 3"), "{e:?}");
        child.kill().unwrap();
        child.wait().unwrap();
        let e = attachable(child.id(), dir.path(), &open).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound, "{e:?}");
    }

    #[test]
    fn the_gdb_probe_passes_only_on_the_probed_pid_and_names_gdbs_complaint() {
        let ok = "Attaching to process 4242\n[Inferior 1 (process 4242) detached]\n$1 = 4242\nprobe-pid=4242\n";
        gdb_probe_verdict(ok).unwrap();
        let other = "$1 = 17\nprobe-pid=4242\n";
        assert!(gdb_probe_verdict(other).is_err());
        let vm = "Attaching to process 4242\nCouldn't write extended state status: Bad address.\n[Inferior 1 (process 4242) detached]\nprobe-pid=4242\n";
        let e = gdb_probe_verdict(vm).unwrap_err();
        assert!(
            e.contains("Couldn't write extended state status: Bad address."),
            "{e}"
        );
        let e = gdb_probe_verdict("sh: 2: gdb: not found\nprobe-pid=9\n").unwrap_err();
        assert!(e.contains("gdb: not found"), "{e}");
        assert!(
            gdb_probe_verdict("")
                .unwrap_err()
                .contains("printed nothing")
        );
    }

    #[test]
    fn ptrace_scope_one_needs_cap_sys_ptrace() {
        let dir = tempfile::tempdir().unwrap();
        let one = scope_file(&dir, "1");
        let with = "CapEff:\t000001ffffffffff\n";
        let without = "CapEff:\t0000000000000000\n";
        ptrace_allowed(1, &one, with).unwrap();
        let e = ptrace_allowed(1, &one, without).unwrap_err();
        assert!(e.message.contains("ptrace_scope is 1"), "{e:?}");
        assert!(
            e.hint.contains("sysctl kernel.yama.ptrace_scope=0"),
            "{e:?}"
        );
        // No Yama at all: the classic same-user rule, already checked.
        ptrace_allowed(1, &dir.path().join("absent"), without).unwrap();
    }
}

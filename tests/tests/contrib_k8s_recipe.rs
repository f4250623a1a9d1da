//! `contrib/k8s/toolvisor-sidecar.yaml` played without a cluster (the recipe
//! crash-looped, its state emptyDir being group-writable): each `emptyDir` volume is made the
//! way the kubelet makes one (owned by root, mode 2777 with the pod's fsGroup), the init
//! container's command runs against them as root, and the toolvisor container's command runs
//! with its args and env as the pod's `runAsUser`/`runAsGroup` until its startup probe
//! (`toolvisor status`) passes. Every path of the manifest is mapped into a temp dir.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value as Json;
use toolvisor_tests::{bin, wait_for};

/// The parts of the manifest the recipe depends on.
#[derive(Debug, Default)]
struct Pod {
    run_as_user: u32,
    run_as_group: u32,
    fs_group: u32,
    /// emptyDir volume names.
    volumes: Vec<String>,
    /// container name -> (command or args, env, volume name -> mount path)
    containers: BTreeMap<String, Container>,
}

#[derive(Debug, Default)]
struct Container {
    command: Vec<String>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    mounts: BTreeMap<String, String>,
}

/// A flow sequence of the manifest (`["sh", "-c", "…"]`) is JSON.
fn flow_list(value: &str) -> Vec<String> {
    let v: Json = serde_json::from_str(value.trim())
        .unwrap_or_else(|e| panic!("not a flow list ({e}): {value}"));
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn number(line: &str) -> u32 {
    line.split(':').nth(1).unwrap().trim().parse().unwrap()
}

/// Read the manifest line by line: it is ours, kept in this shape (a change of shape fails
/// here loudly, not silently).
fn parse(text: &str) -> Pod {
    let mut pod = Pod::default();
    let mut section = "";
    let mut current: Option<String> = None;
    let mut in_env = false;
    let mut pending_env: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || t.is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if indent == 2 && t.ends_with(':') {
            section = t.trim_end_matches(':');
            current = None;
            continue;
        }
        match section {
            "securityContext" if indent == 4 => {
                if t.starts_with("runAsUser:") {
                    pod.run_as_user = number(t);
                } else if t.starts_with("runAsGroup:") {
                    pod.run_as_group = number(t);
                } else if t.starts_with("fsGroup:") {
                    pod.fs_group = number(t);
                }
            }
            "volumes" if indent == 4 => {
                if let Some(name) = t.strip_prefix("- name: ") {
                    pod.volumes.push(name.to_string());
                }
            }
            "volumes" if t.starts_with("emptyDir") => {}
            "initContainers" | "containers" => {
                if indent == 4
                    && let Some(name) = t.strip_prefix("- name: ")
                {
                    current = Some(name.to_string());
                    pod.containers.entry(name.to_string()).or_default();
                    in_env = false;
                    continue;
                }
                let Some(c) = current.as_ref().and_then(|n| pod.containers.get_mut(n)) else {
                    continue;
                };
                if indent == 6 {
                    in_env = t == "env:";
                    if let Some(v) = t.strip_prefix("command:") {
                        c.command = flow_list(v);
                    } else if let Some(v) = t.strip_prefix("args:") {
                        c.args = flow_list(v);
                    }
                } else if in_env && let Some(name) = t.strip_prefix("- name: ") {
                    pending_env = Some(name.to_string());
                } else if in_env && let Some(value) = t.strip_prefix("value: ") {
                    c.env.push((pending_env.take().unwrap(), value.to_string()));
                } else if let Some(m) = t.strip_prefix("- { name: ") {
                    let (name, rest) = m.split_once(',').unwrap();
                    let path = rest
                        .trim()
                        .strip_prefix("mountPath: ")
                        .unwrap()
                        .trim_end_matches('}')
                        .trim();
                    c.mounts.insert(name.trim().to_string(), path.to_string());
                }
            }
            _ => {}
        }
    }
    pod
}

/// Replace every mount path of `c` in `s` by where that volume lives here.
fn mapped(s: &str, c: &Container, volumes: &BTreeMap<String, PathBuf>) -> String {
    let mut mounts: Vec<_> = c.mounts.iter().collect();
    // Longest first, so /var/lib/toolvisor is not taken for a prefix of something longer.
    mounts.sort_by_key(|(_, p)| std::cmp::Reverse(p.len()));
    let mut out = s.to_string();
    for (name, path) in mounts {
        out = out.replace(path.as_str(), volumes[name].to_str().unwrap());
    }
    out
}

#[test]
fn the_sidecar_recipe_starts_the_daemon_from_empty_dirs() {
    toolvisor_tests::require_root("playing the kubelet and the pod's uid");
    let manifest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/k8s/toolvisor-sidecar.yaml");
    let pod = parse(&std::fs::read_to_string(&manifest).unwrap());
    assert!(pod.run_as_user != 0 && pod.fs_group != 0, "{pod:?}");
    let daemon = pod
        .containers
        .get("toolvisor")
        .unwrap_or_else(|| panic!("no toolvisor container: {pod:?}"));

    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The image's binary; the checkout may live where the pod's uid cannot go.
    let image_bin = root.path().join("toolvisor");
    std::fs::copy(bin(), &image_bin).unwrap();
    std::fs::set_permissions(&image_bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut volumes = BTreeMap::new();
    for name in &pod.volumes {
        let dir = root.path().join("volumes").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        // An emptyDir under fsGroup: root's, group the fsGroup, rwxrwsrwx.
        chown(&dir, Some(0), Some(pod.fs_group)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o2777)).unwrap();
        volumes.insert(name.clone(), dir);
    }
    std::fs::set_permissions(
        root.path().join("volumes"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();

    for (name, c) in &pod.containers {
        if name == "toolvisor" || c.command.first().map(String::as_str) != Some("sh") {
            continue;
        }
        let script = mapped(&c.command[2], c, &volumes);
        let out = Command::new("sh").args(["-c", &script]).output().unwrap();
        assert!(
            out.status.success(),
            "init container {name}: {script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let args: Vec<String> = daemon
        .args
        .iter()
        .map(|a| mapped(a, daemon, &volumes))
        .collect();
    let log = root.path().join("daemon.log");
    let mut cmd = Command::new(&image_bin);
    // The image's entrypoint is `toolvisor serve`.
    cmd.arg("serve")
        .args(&args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", root.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .uid(pod.run_as_user)
        .gid(pod.run_as_group);
    for (k, v) in &daemon.env {
        cmd.env(k, mapped(v, daemon, &volumes));
    }
    let mut child = cmd.spawn().unwrap();
    let socket = args
        .windows(2)
        .find(|w| w[0] == "--socket")
        .map(|w| w[1].clone())
        .expect("the container names its socket");
    let started = wait_for("the startup probe to pass", Duration::from_secs(30), || {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "the daemon exited ({status}) as the pod would crash-loop:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        Command::new(&image_bin)
            .args(["status", "--socket", &socket])
            .uid(pod.run_as_user)
            .gid(pod.run_as_group)
            .env_clear()
            .output()
            .ok()
            .filter(|o| o.status.success())
    });
    assert!(started.status.success());
    let _ = toolvisor_tests::sigterm(child.id());
    wait_for("the daemon to stop", Duration::from_secs(30), || {
        child.try_wait().ok().flatten()
    });
}

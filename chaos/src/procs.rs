//! What the runner knows of processes, read from /proc only: the daemon's descendants (by
//! parent pid), their start times (to tell a leaked process from a reused pid), and RSS.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The few fields of `/proc/<pid>/stat` the runner needs.
#[derive(Clone, Debug)]
pub struct Stat {
    pub pid: i32,
    pub ppid: i32,
    pub comm: String,
    pub state: char,
    /// Clock ticks after boot: with the pid, names one process for good.
    pub start: u64,
}

/// Every thread of `pid` is stopped (`T`): a SIGSTOP has taken effect, not merely been sent.
pub fn all_threads_stopped(pid: i32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| {
        tasks.flatten().all(|t| {
            std::fs::read_to_string(t.path().join("stat")).is_ok_and(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
            })
        })
    })
}

pub fn read_stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = text.find('(')?;
    let (head, rest) = text.rsplit_once(')')?;
    let comm = head.get(open + 1..)?.to_string();
    // Fields after the comm start at field 3 (state); ppid is field 4, starttime field 22.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        pid,
        ppid: fields.get(1)?.parse().ok()?,
        comm,
        state: fields.first()?.chars().next()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

pub fn all_stats() -> Vec<Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read_stat)
        .collect()
}

/// Every live (non-zombie) process whose parent chain leads to `root`, `root` excluded.
pub fn descendants(root: i32) -> Vec<Stat> {
    tree(root, false)
}

/// The zombies among `root`'s descendants (ended, not yet reaped by their parent).
pub fn zombies(root: i32) -> Vec<Stat> {
    tree(root, true)
        .into_iter()
        .filter(|s| s.state == 'Z')
        .collect()
}

fn tree(root: i32, with_zombies: bool) -> Vec<Stat> {
    let stats = all_stats();
    let mut children: HashMap<i32, Vec<&Stat>> = HashMap::new();
    for s in &stats {
        children.entry(s.ppid).or_default().push(s);
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    let mut seen = HashSet::new();
    while let Some(pid) = todo.pop() {
        for child in children.get(&pid).map(Vec::as_slice).unwrap_or_default() {
            if seen.insert(child.pid) {
                todo.push(child.pid);
                if with_zombies || child.state != 'Z' {
                    out.push((*child).clone());
                }
            }
        }
    }
    out
}

/// True while the process `pid` started at `start` still exists and is not a zombie.
pub fn alive(pid: i32, start: u64) -> bool {
    read_stat(pid).is_some_and(|s| s.start == start && s.state != 'Z')
}

/// Resident set size in KiB (`VmRSS` of /proc/<pid>/status).
pub fn rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Open file descriptors of `pid` (entries of /proc/<pid>/fd).
pub fn fd_count(pid: i32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// What kind of resource a daemon descendant belongs to, from its command line: the
/// report counts faults per kind with it.
pub fn classify(cmdline: &str, comm: &str) -> &'static str {
    if cmdline.contains("__shim") {
        "shim"
    } else if cmdline.contains("llama-server") {
        "inference"
    } else if cmdline.contains("pyright") {
        "lsp_pyright"
    } else if cmdline.contains("clangd") {
        "lsp_clangd"
    } else if cmdline.contains("debugpy") || cmdline.contains("prog.py") {
        "debug_debugpy"
    } else if cmdline.contains("--expose-internals") {
        "eval_javascript"
    } else if comm.starts_with("python") && cmdline.contains(" -c ") {
        "eval_python"
    } else if cmdline.contains("vibe-worker") || cmdline == "sleep 0.3" {
        "vibe"
    } else if cmdline.contains("sleep 30") || cmdline.contains("line$i") {
        "process"
    } else {
        "bash"
    }
}

pub fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .trim_end_matches('\0')
                .replace('\0', " ")
        })
        .unwrap_or_default()
}

/// One process ever seen below the daemon.
#[derive(Clone, Debug)]
pub struct Seen {
    pub pid: i32,
    pub start: u64,
    pub comm: String,
    pub cmdline: String,
    /// The daemon incarnation it was first seen below.
    pub incarnation: u64,
}

/// Scans the daemon's descendants every few milliseconds and remembers every one it saw.
#[derive(Clone)]
pub struct Watch {
    root: Arc<AtomicI32>,
    incarnation: Arc<AtomicU64>,
    seen: Arc<Mutex<HashMap<(i32, u64), Seen>>>,
}

impl Watch {
    pub fn new(root: i32) -> Watch {
        Watch {
            root: Arc::new(AtomicI32::new(root)),
            incarnation: Arc::new(AtomicU64::new(0)),
            seen: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Watch the next daemon incarnation from now on (the old one's are remembered).
    pub fn set_root(&self, root: i32, incarnation: u64) {
        self.scan();
        self.root.store(root, Ordering::SeqCst);
        self.incarnation.store(incarnation, Ordering::SeqCst);
    }

    /// Scan once; returns the current descendants.
    pub fn scan(&self) -> Vec<Stat> {
        let incarnation = self.incarnation.load(Ordering::SeqCst);
        let now = descendants(self.root.load(Ordering::SeqCst));
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        for s in &now {
            seen.entry((s.pid, s.start)).or_insert_with(|| Seen {
                pid: s.pid,
                start: s.start,
                comm: s.comm.clone(),
                cmdline: cmdline(s.pid),
                incarnation,
            });
        }
        now
    }

    /// Scan every `every` until `stop` is set.
    pub fn run(&self, every: Duration, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            self.scan();
            std::thread::sleep(every);
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_are_classified_by_the_resource_they_serve() {
        let cases = [
            ("/t/toolvisor __shim bash -c echo hi", "toolvisor", "shim"),
            (
                "node /d/node_modules/.bin/pyright-langserver --stdio",
                "node",
                "lsp_pyright",
            ),
            ("clangd", "clangd", "lsp_clangd"),
            (
                "/d/venv/bin/python -m debugpy.adapter",
                "python",
                "debug_debugpy",
            ),
            (
                "/d/venv/bin/python /w/dbg/prog.py",
                "python",
                "debug_debugpy",
            ),
            (
                "node --expose-internals -e driver",
                "node",
                "eval_javascript",
            ),
            ("/d/venv/bin/python -u -c driver", "python", "eval_python"),
            ("/bin/sh /t/vibe-worker.sh tok", "vibe-worker.sh", "vibe"),
            ("sleep 0.3", "sleep", "vibe"),
            ("sleep 30", "sleep", "process"),
            ("bash -c echo tok", "bash", "bash"),
        ];
        for (cmdline, comm, kind) in cases {
            assert_eq!(classify(cmdline, comm), kind, "{cmdline}");
        }
    }

    #[test]
    fn a_child_of_this_process_is_a_descendant_until_it_ends() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let me = std::process::id() as i32;
        let pid = child.id() as i32;
        let found = descendants(me);
        let stat = found.iter().find(|s| s.pid == pid).expect("child listed");
        assert_eq!(stat.ppid, me);
        assert!(alive(pid, stat.start));
        assert!(!alive(pid, stat.start + 1));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!alive(pid, stat.start));
        assert!(rss_kib(me).unwrap() > 0);
    }
}

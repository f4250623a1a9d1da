//! Helpers shared by the kit's process tests: spawn specs, deadline polling, `/proc` checks.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::watch;
use toolvisor_kit::process::{ExitStatus, Ledger, SpawnSpec};

/// Generous: these are upper bounds for slow CI machines, not expectations.
pub const DEADLINE: Duration = Duration::from_secs(10);

pub fn shim() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolvisor-kit-shim"))
}

/// The system interpreter, not a pyenv shim (which is itself a script and slow to start).
pub fn python3() -> String {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3".to_owned()
    } else {
        "python3".to_owned()
    }
}

pub fn spec(program: &str, args: &[&str], shimmed: bool) -> SpawnSpec {
    SpawnSpec {
        program: program.to_owned(),
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        cwd: PathBuf::from("/"),
        env: vec![
            ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ],
        stdin: false,
        shim: shimmed.then(shim),
        ledger: None::<Ledger>,
        label: format!("test/{program}"),
        scratch: false,
    }
}

pub async fn read_to_string(mut pipe: pipe::Receiver, what: &str) -> String {
    let mut text = String::new();
    tokio::time::timeout(DEADLINE, pipe.read_to_string(&mut text))
        .await
        .unwrap_or_else(|_| panic!("timed out reading {what}"))
        .unwrap_or_else(|error| panic!("reading {what}: {error}"));
    text
}

pub async fn read_line(reader: &mut BufReader<pipe::Receiver>, what: &str) -> String {
    let mut line = String::new();
    tokio::time::timeout(DEADLINE, reader.read_line(&mut line))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap_or_else(|error| panic!("reading {what}: {error}"));
    line.trim_end().to_owned()
}

pub async fn wait_exit(exit: &mut watch::Receiver<Option<ExitStatus>>, what: &str) -> ExitStatus {
    let status = tokio::time::timeout(DEADLINE, exit.wait_for(Option::is_some))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for the exit of {what}"))
        .unwrap_or_else(|_| panic!("exit channel of {what} closed"));
    status.expect("waited for Some")
}

/// Polls `done` every few milliseconds until it holds; panics naming `what` after [`DEADLINE`].
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The async flavour of [`wait_until`].
pub async fn wait_until_async(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `(state, ppid, start time)` of `pid` from `/proc/<pid>/stat`.
pub fn stat(pid: u32) -> Option<(char, u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    Some((
        fields[0].chars().next()?,
        fields[1].parse().ok()?,
        fields[19].parse().ok()?,
    ))
}

pub fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|text| text.trim_end().to_owned())
}

/// A process seen alive at some point, identified for good by its start time.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    pub pid: u32,
    pub start_time: u64,
}

impl Seen {
    pub fn now(pid: u32) -> Seen {
        let (_, _, start_time) = stat(pid).unwrap_or_else(|| panic!("process {pid} not found"));
        Seen { pid, start_time }
    }

    /// Runs nothing any more: gone, replaced by another process, or a zombie that is not
    /// ours to reap (a zombie of ours would be a leak).
    pub fn is_dead(&self) -> bool {
        match stat(self.pid) {
            None => true,
            Some((_, _, start)) if start != self.start_time => true,
            Some((state, ppid, _)) => matches!(state, 'Z' | 'X') && ppid != std::process::id(),
        }
    }

    pub fn is_running(&self) -> bool {
        matches!(stat(self.pid), Some((state, _, start)) if start == self.start_time && !matches!(state, 'Z' | 'X'))
    }
}

/// Zombies whose parent is this test process, among `pids`.
pub fn our_zombies(pids: &[u32]) -> Vec<u32> {
    pids.iter()
        .copied()
        .filter(|&pid| matches!(stat(pid), Some(('Z', ppid, _)) if ppid == std::process::id()))
        .collect()
}

/// Every zombie whose parent is this test process.
pub fn all_our_zombies() -> Vec<u32> {
    let pids: Vec<u32> = std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    our_zombies(&pids)
}

/// Process group of `pid` (field 5 of `/proc/<pid>/stat`).
pub fn pgrp(pid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(2)?.parse().ok()
}

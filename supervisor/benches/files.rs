//! Figures of the file tools, each against its peer on the same tree in the same run:
//! `grep` through the daemon vs `rg`, `find` vs `fd`, and `read` of a 10 MB file's last 100
//! lines vs `tail -n 100`. `cargo bench -p toolvisor --bench files`.
//!
//! The tree is the cargo registry's sources (`$CARGO_HOME/registry/src`, or
//! `TOOLVISOR_BENCH_TREE`). Needs `rg` and `fd` (Debian: `apt-get install ripgrep fd-find`,
//! whose binary is `fdfind`). Peers write into a pipe that is drained, never to /dev/null
//! (ripgrep stops at the first match when its output is /dev/null). The daemon answers
//! through its real path: socket, bincode, the result store (large outputs are stored and
//! projected, as a model would get them).

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;
use common::wait_socket;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::wire::Outcome;

const RUNS: usize = 11;

fn main() {
    let tree = std::env::var_os("TOOLVISOR_BENCH_TREE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("CARGO_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cargo"));
            home.join("registry/src")
        });
    assert!(
        tree.is_dir(),
        "{} is not a directory (set TOOLVISOR_BENCH_TREE)",
        tree.display()
    );
    let rg = which(&["rg"]).expect("ripgrep (`rg`) is needed: apt-get install ripgrep");
    let fd = which(&["fd", "fdfind"]).expect("fd is needed: apt-get install fd-find");
    let fd_name = fd.file_name().unwrap().to_string_lossy().into_owned();

    let dir = tempfile::tempdir().expect("temp dir");
    let sock = dir.path().join("toolvisor.sock");
    let _daemon = common::start_daemon(dir.path(), &sock, "");
    wait_socket(&sock);
    let mut c = connect(&sock, &tree);
    let files = count_lines(Command::new(&fd).args(["-t", "f", "."]).current_dir(&tree));
    let bytes = du_bytes(&tree);
    println!(
        "tree: {} ({} files, {:.0} MiB); rg: {}; fd: {}",
        tree.display(),
        files,
        bytes as f64 / (1 << 20) as f64,
        version(&rg),
        version(&fd)
    );

    let mut rows = Vec::new();
    // grep: a literal with many matches, and a regex.
    for pattern in ["unsafe", r"fn \w+_mut\("] {
        let args = json!({"pattern": pattern, "max_results": 100_000});
        let v = call(&mut c, "grep", args.clone());
        let ours = v["matches"].as_u64().unwrap();
        let theirs = sum_counts(
            Command::new(&rg)
                .args(["-c", "--no-messages", pattern])
                .current_dir(&tree),
        );
        assert_eq!(
            ours, theirs,
            "grep {pattern}: toolvisor found {ours} lines, rg {theirs}"
        );
        let (t_ours, t_peer) = interleaved(
            || {
                call(&mut c, "grep", args.clone());
            },
            || {
                drain(
                    Command::new(&rg)
                        .args(["-n", "--no-heading", "--color", "never", pattern])
                        .current_dir(&tree),
                );
            },
        );
        rows.push((
            format!("`grep` `{pattern}` ({ours} matching lines)"),
            t_ours,
            format!("`rg -n '{pattern}'`"),
            t_peer,
            "≤ 1.5×",
        ));
    }
    // find: every Rust file, and a path glob.
    for (pattern, fd_args) in [
        ("*.rs", vec!["-g", "*.rs"]),
        ("*.toml", vec!["-g", "*.toml"]),
    ] {
        let args = json!({"pattern": pattern, "max_results": 1_000_000});
        let v = call(&mut c, "find", args.clone());
        let ours = v["total"].as_u64().unwrap();
        let theirs = count_lines(Command::new(&fd).args(&fd_args).current_dir(&tree));
        assert_eq!(
            ours, theirs,
            "find {pattern}: toolvisor found {ours}, fd {theirs}"
        );
        let (t_ours, t_peer) = interleaved(
            || {
                call(&mut c, "find", args.clone());
            },
            || {
                drain(Command::new(&fd).args(&fd_args).current_dir(&tree));
            },
        );
        rows.push((
            format!("`find {pattern:?}` ({ours} paths)"),
            t_ours,
            format!("`{fd_name} -g '{pattern}'`"),
            t_peer,
            "≤ 1.5×",
        ));
    }

    // read: the last 100 lines of a 10 MB file.
    let work = tempfile::tempdir().unwrap();
    let big = work.path().join("big.log");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
    let mut n = 0u64;
    while n < 10 * 1024 * 1024 {
        let line = format!(
            "{n:>12} 2026-11-30T12:00:00Z INFO request served path=/api/v1/items status=200 ms=3\n"
        );
        n += line.len() as u64;
        f.write_all(line.as_bytes()).unwrap();
    }
    drop(f);
    let mut rc = connect(&sock, work.path());
    let tail_args = json!({"path": "big.log", "offset": -100});
    let v = call(&mut rc, "read", tail_args.clone());
    assert_eq!(v["lines"], 100);
    let total = v["total_lines"].as_u64().unwrap();
    let samples: Vec<f64> = (0..200)
        .map(|_| {
            let t = Instant::now();
            call(&mut rc, "read", tail_args.clone());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let by_line = json!({"path": "big.log", "offset": total - 99, "limit": 100});
    let line_samples: Vec<f64> = (0..200)
        .map(|_| {
            let t = Instant::now();
            call(&mut rc, "read", by_line.clone());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let tail: Vec<f64> = (0..50)
        .map(|_| {
            let t = Instant::now();
            drain(Command::new("tail").args(["-n", "100"]).arg(&big));
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let peer = Stat::of(&tail);
    rows.push((
        format!("`read` last 100 lines of a 10 MB file (`offset: -100`, {total} lines)"),
        Stat::of(&samples),
        "`tail -n 100` (process start included)".into(),
        peer,
        "≤ 5 ms",
    ));
    rows.push((
        "`read` the same lines by number (`offset: N-99, limit: 100`)".into(),
        Stat::of(&line_samples),
        "`tail -n 100`".into(),
        peer,
        "≤ 5 ms",
    ));

    println!();
    println!(
        "| figure | toolvisor median (best) | peer | peer median (best) | ratio of medians (of bests) | target |"
    );
    println!("|---|---|---|---|---|---|");
    for (what, ours, peer_name, peer, target) in rows {
        println!(
            "| {what} | {:.1} ms ({:.1}) | {peer_name} | {:.1} ms ({:.1}) | {:.2}× ({:.2}×) | {target} |",
            ours.median,
            ours.min,
            peer.median,
            peer.min,
            ours.median / peer.median,
            ours.min / peer.min
        );
    }
}

/// Medians and minimums (ms) of `RUNS` runs of each, alternating, after one warm-up of each.
fn interleaved(mut ours: impl FnMut(), mut peer: impl FnMut()) -> (Stat, Stat) {
    ours();
    peer();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let t = Instant::now();
        ours();
        a.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        peer();
        b.push(t.elapsed().as_secs_f64() * 1e3);
    }
    (Stat::of(&a), Stat::of(&b))
}

/// The median and the best of a set of timings (ms); the best shows the cost without the
/// noise of other work on the machine.
#[derive(Clone, Copy)]
struct Stat {
    median: f64,
    min: f64,
}

impl Stat {
    fn of(v: &[f64]) -> Stat {
        Stat {
            median: median(v),
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
        }
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn which(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|n| {
        std::env::split_paths(&path)
            .map(|d| d.join(n))
            .find(|p| p.is_file())
    })
}

fn version(bin: &Path) -> String {
    let out = Command::new(bin).arg("--version").output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// Run to the end with stdout in a pipe that is read and dropped.
fn drain(cmd: &mut Command) -> u64 {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0;
    loop {
        match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k as u64,
        }
    }
    let _ = child.wait();
    n
}

fn count_lines(cmd: &mut Command) -> u64 {
    let out = cmd.stderr(Stdio::null()).output().unwrap();
    out.stdout.iter().filter(|&&b| b == b'\n').count() as u64
}

fn sum_counts(cmd: &mut Command) -> u64 {
    let out = cmd.stderr(Stdio::null()).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.rsplit_once(':')?.1.parse::<u64>().ok())
        .sum()
}

fn du_bytes(dir: &Path) -> u64 {
    let out = Command::new("du").args(["-sb"]).arg(dir).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn connect(sock: &Path, workdir: &Path) -> Client {
    Client::connect(sock, common::read_options(workdir, "")).expect("connect to the daemon")
}

fn call(c: &mut Client, tool: &str, args: Json) -> Json {
    match c.call("bench", tool, args.clone()).map(|r| r.outcome) {
        Ok(Outcome::Ok(v)) => v.0,
        other => panic!("{tool} {args} failed: {other:?}"),
    }
}

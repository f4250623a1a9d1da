//! Reads `/proc` (parentage, process groups, start times, memory) so teardown can find every process of a tree.

use std::collections::HashMap;
use std::fs;

/// The fields of `/proc/<pid>/stat` this crate needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProcStat {
    pub(crate) pid: u32,
    /// Field 3: `R`, `S`, `D`, `T`, `Z`, `X`, ...
    pub(crate) state: char,
    /// Field 4.
    pub(crate) ppid: u32,
    /// Field 5.
    pub(crate) pgrp: u32,
    /// Field 22, in clock ticks since boot: with the pid it names one process for good.
    pub(crate) start_time: u64,
}

impl ProcStat {
    /// A zombie (`Z`) or a dead task (`X`) runs nothing and can no longer be signalled usefully.
    pub(crate) fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Parses one `/proc/<pid>/stat` line.
///
/// The command name (field 2) is in parentheses and may itself contain spaces and
/// parentheses, so the fields after it start at the *last* `)`.
pub(crate) fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    if close < open {
        return None;
    }
    let pid = text[..open].trim().parse().ok()?;
    let mut rest = text[close + 1..].split_ascii_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    let pgrp = rest.next()?.parse().ok()?;
    // Fields 6..=21 lie between pgrp (5) and starttime (22).
    let start_time = rest.nth(16)?.parse().ok()?;
    Some(ProcStat {
        pid,
        state,
        ppid,
        pgrp,
        start_time,
    })
}

/// Reads `/proc/<pid>/stat`; `None` when the process does not exist (any more).
pub(crate) fn read_stat(pid: u32) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// True while `pid` exists and is neither a zombie nor dead: a process whose files are still
/// its own (a temp file of a live pid may be mid-write).
pub fn alive(pid: u32) -> bool {
    read_stat(pid).is_some_and(|s| !s.is_dead())
}

/// The start time (field 22 of `/proc/<pid>/stat`) of `pid`.
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    read_stat(pid).map(|stat| stat.start_time)
}

/// The real and effective uid of `pid` (the `Uid:` line of `/proc/<pid>/status`).
pub(crate) fn uids(pid: u32) -> Option<(u32, u32)> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("Uid:"))?;
    let mut words = line["Uid:".len()..].split_ascii_whitespace();
    Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
}

/// Whether the environment `pid` was started with (`/proc/<pid>/environ`) holds exactly
/// `key=value`. Reading it needs the rights to ptrace `pid`, so for a process of another
/// user (or a non-dumpable one) it is `false` unless we are root.
pub(crate) fn environ_has(pid: u32, key: &str, value: &str) -> bool {
    environ_holds(pid, &format!("{key}={value}"))
}

/// Whether the environment `pid` was started with holds exactly the entry `key_value`
/// (`KEY=value`); the same rights as [`environ_has`].
pub(crate) fn environ_holds(pid: u32, key_value: &str) -> bool {
    let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    environ
        .split(|&byte| byte == 0)
        .any(|entry| entry == key_value.as_bytes())
}

/// One snapshot of every process visible in `/proc`.
pub(crate) fn all_stats() -> Vec<ProcStat> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(read_stat)
        .collect()
}

/// Live (not zombie) descendants of `root` in `stats`, by parentage; `root` itself excluded.
pub(crate) fn descendants_in(stats: &[ProcStat], root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for stat in stats.iter().filter(|stat| !stat.is_dead()) {
        children.entry(stat.ppid).or_default().push(stat.pid);
    }
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(parent) = queue.pop() {
        for &child in children.get(&parent).map(Vec::as_slice).unwrap_or_default() {
            // A pid cannot be its own ancestor, but /proc is read non-atomically: stay finite.
            if child != root && !found.contains(&child) {
                found.push(child);
                queue.push(child);
            }
        }
    }
    found
}

/// Live members of process group `pgid` in `stats`.
pub(crate) fn group_members_in(stats: &[ProcStat], pgid: u32) -> Vec<u32> {
    stats
        .iter()
        .filter(|stat| stat.pgrp == pgid && !stat.is_dead())
        .map(|stat| stat.pid)
        .collect()
}

/// All live descendants of `root` (children, grandchildren, ...) by `/proc` parentage.
///
/// Zombies are left out; `root` itself is not included. The result is a snapshot: a process
/// that forks right after it is missed, which is why teardown loops until nothing is left.
pub fn descendants(root: u32) -> Vec<u32> {
    descendants_in(&all_stats(), root)
}

/// Resident set size of `pid` in bytes (`VmRSS` of `/proc/<pid>/status`); `None` when the
/// process is gone or is a zombie.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let mut words = line["VmRSS:".len()..].split_ascii_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    let unit = match words.next() {
        Some("kB") | None => 1024,
        Some("mB") | Some("MB") => 1024 * 1024,
        Some(_) => return None,
    };
    value.checked_mul(unit)
}

/// Inodes of the TCP sockets in LISTEN state on local `port` (any address, IPv4 and IPv6),
/// parsed from one `/proc/net/tcp`-format table.
pub(crate) fn listen_inodes_in(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let local = fields.get(1)?;
            let (_, hex_port) = local.rsplit_once(':')?;
            let listening = *fields.get(3)? == "0A";
            (listening && u16::from_str_radix(hex_port, 16).ok()? == port)
                .then(|| fields.get(9)?.parse().ok())
                .flatten()
        })
        .collect()
}

/// Whether `root` or one of its live descendants holds the socket listening on TCP `port`
/// (the listeners asked of the kernel's sock_diag, else read from `/proc/net/tcp{,6}`, against
/// the processes' `/proc/<pid>/fd`). `false` when nothing listens there, or only a process
/// outside that tree does: a server's port that another process took before it could bind.
pub fn tree_listens_on(root: u32, port: u16) -> bool {
    let inodes: Vec<u64> = super::sockdiag::listen_inodes(port).unwrap_or_else(|_| {
        ["/proc/net/tcp", "/proc/net/tcp6"]
            .iter()
            .filter_map(|t| fs::read_to_string(t).ok())
            .flat_map(|t| listen_inodes_in(&t, port))
            .collect()
    });
    if inodes.is_empty() {
        return false;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    std::iter::once(root).chain(descendants(root)).any(|pid| {
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.flatten().any(|fd| {
            fs::read_link(fd.path())
                .is_ok_and(|l| wanted.iter().any(|w| l.as_os_str() == w.as_str()))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(pid: u32, comm: &str, ppid: u32, pgrp: u32, start: u64) -> String {
        format!(
            "{pid} ({comm}) S {ppid} {pgrp} {pgrp} 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 {start} 1000 10 18446744073709551615"
        )
    }

    #[test]
    fn parses_a_plain_stat_line() {
        let stat = parse_stat(&line(42, "sleep", 7, 42, 12345)).expect("parsed");
        assert_eq!(
            stat,
            ProcStat {
                pid: 42,
                state: 'S',
                ppid: 7,
                pgrp: 42,
                start_time: 12345
            }
        );
    }

    #[test]
    fn parses_a_comm_with_spaces_and_parentheses() {
        let stat = parse_stat(&line(9, "a) b (c) Z 1 1", 3, 4, 99)).expect("parsed");
        assert_eq!((stat.ppid, stat.pgrp, stat.start_time), (3, 4, 99));
        assert_eq!(stat.state, 'S');
    }

    #[test]
    fn finds_the_listening_socket_of_a_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4444 1 0000000000000000 100 0 0 10 0
";
        assert_eq!(listen_inodes_in(table, 8080), vec![4242]);
        assert_eq!(listen_inodes_in(table, 8081), vec![4444]);
        assert!(listen_inodes_in(table, 9000).is_empty());
    }

    #[test]
    fn this_process_holds_the_port_it_listens_on_and_not_another() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = std::process::id();
        assert!(tree_listens_on(me, port));
        // A connected (not listening) socket is not a listener.
        let _conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        drop(listener);
        assert!(!tree_listens_on(me, port));
        // Another process (a child that does not hold the socket) does not listen on it.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let held = tree_listens_on(other.id(), listener.local_addr().unwrap().port());
        let _ = other.kill();
        let _ = other.wait();
        assert!(!held);
    }

    #[test]
    fn rejects_truncated_lines() {
        assert_eq!(parse_stat("12 (x) S 1 2"), None);
        assert_eq!(parse_stat(""), None);
        assert_eq!(parse_stat("12 )x( S 1 2 3"), None);
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        let stat = read_stat(me).expect("own stat");
        assert_eq!(stat.pid, me);
        assert!(rss_bytes(me).is_some_and(|rss| rss > 0));
        let euid = nix::unistd::geteuid().as_raw();
        assert_eq!(uids(me).map(|(_, effective)| effective), Some(euid));
        let path = std::env::var("PATH").unwrap_or_default();
        assert!(environ_has(me, "PATH", &path) || path.is_empty());
        assert!(!environ_has(me, "PATH", "not the path"));
    }

    #[test]
    fn walks_parentage_and_skips_zombies() {
        let mk = |pid, ppid, state| ProcStat {
            pid,
            state,
            ppid,
            pgrp: 1,
            start_time: 0,
        };
        let stats = [
            mk(10, 1, 'S'),
            mk(11, 10, 'S'),
            mk(12, 11, 'R'),
            mk(13, 10, 'Z'),
            mk(14, 1, 'S'),
        ];
        let mut found = descendants_in(&stats, 10);
        found.sort_unstable();
        assert_eq!(found, vec![11, 12]);
        assert_eq!(group_members_in(&stats, 1).len(), 4);
    }
}

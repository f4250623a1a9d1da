//! Who is on the other end of a listener's connection: the client process when it can be
//! found (SO_PEERCRED on a Unix socket; on loopback TCP the kernel's socket table names the
//! client socket's owner and inode, and /proc names the process holding that inode), else
//! its user. Used to cap MCP sessions per client, so one client cannot take every session,
//! and to hold a keyless inference port to the daemon's own user.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// A client of the listener, as precisely as it could be told.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    /// The process holding the client's socket.
    Process { pid: u32, uid: u32 },
    /// Only its user is known (the process could not be found: another user's /proc, a
    /// socket passed between processes).
    User { uid: u32 },
    /// Nothing is known (no /proc). All such clients share one allowance.
    Unknown,
}

impl Peer {
    pub fn uid(&self) -> Option<u32> {
        match self {
            Peer::Process { uid, .. } | Peer::User { uid } => Some(*uid),
            Peer::Unknown => None,
        }
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Process { pid, uid } => write!(f, "process {pid} (uid {uid})"),
            Peer::User { uid } => write!(f, "uid {uid}"),
            Peer::Unknown => write!(f, "an unidentified client"),
        }
    }
}

/// The client of a Unix-socket connection.
pub fn unix_peer(stream: &tokio::net::UnixStream) -> Peer {
    match stream.peer_cred() {
        Ok(cred) => match cred.pid() {
            Some(pid) if pid > 0 => Peer::Process {
                pid: pid as u32,
                uid: cred.uid(),
            },
            _ => Peer::User { uid: cred.uid() },
        },
        Err(_) => Peer::Unknown,
    }
}

/// The client of a loopback TCP connection accepted on `local` from `remote`.
pub fn tcp_peer(local: SocketAddr, remote: SocketAddr) -> Peer {
    let Some((uid, inode)) = client_socket(local, remote) else {
        return Peer::Unknown;
    };
    match inode_owner(inode, uid) {
        Some(pid) => Peer::Process { pid, uid },
        None => Peer::User { uid },
    }
}

/// The user of a loopback TCP client, from the kernel's socket table alone (cheap enough for
/// every accepted connection, unlike the process, which needs a walk of /proc).
pub fn tcp_peer_uid(local: SocketAddr, remote: SocketAddr) -> Option<u32> {
    client_socket(local, remote).map(|(uid, _)| uid)
}

/// The uid and inode of the client's socket: the row of /proc/net/tcp{,6} whose local
/// address is the client's (`remote`) and whose remote address is ours.
fn client_socket(local: SocketAddr, remote: SocketAddr) -> Option<(u32, u64)> {
    let tables: &[&str] = match remote.ip() {
        IpAddr::V4(_) => &["/proc/net/tcp", "/proc/net/tcp6"],
        IpAddr::V6(_) => &["/proc/net/tcp6"],
    };
    tables.iter().find_map(|table| {
        let text = std::fs::read_to_string(table).ok()?;
        find_row(&text, remote, local)
    })
}

/// In one /proc/net/tcp-format table, the (uid, inode) of the socket `from` -> `to`.
fn find_row(table: &str, from: SocketAddr, to: SocketAddr) -> Option<(u32, u64)> {
    table.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 10 {
            return None;
        }
        if !same(parse_addr(cols[1])?, from) || !same(parse_addr(cols[2])?, to) {
            return None;
        }
        Some((cols[7].parse().ok()?, cols[9].parse().ok()?))
    })
}

/// Equal, counting an IPv4-mapped IPv6 address (a v6 socket's view of a v4 peer) as its v4.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let v4 = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    a.port() == b.port() && v4(a.ip()) == v4(b.ip())
}

/// `0100007F:1F90` (IPv4) or 32 hex digits `:PORT` (IPv6): each 32-bit word in host order.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    // The kernel prints the address's bytes read as native-endian 32-bit words.
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?;
        Some(w.to_ne_bytes())
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The process of user `uid` holding socket `inode`, by the links in /proc/PID/fd.
fn inode_owner(inode: u64, uid: u32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let want = format!("socket:[{inode}]");
    let ours = nix::unistd::geteuid().as_raw();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // Another user's fds are readable only by root; skip what we could not read anyway.
        if ours != 0 && entry.metadata().map(|m| m.uid()).ok() != Some(uid) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str()) {
                return Some(pid);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_v4_and_v6_rows_of_the_socket_table() {
        assert_eq!(
            parse_addr("0100007F:1F90"),
            Some("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(
            parse_addr("00000000000000000000000001000000:0050"),
            Some("[::1]:80".parse().unwrap())
        );
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 424242 1 0000000000000000 20 4 30 10 -1\n";
        let from = "127.0.0.1:50000".parse().unwrap();
        let to = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(find_row(table, from, to), Some((1000, 424242)));
        assert_eq!(find_row(table, to, from), None);
    }

    #[test]
    fn finds_the_process_of_a_real_loopback_client() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server_side, remote) = listener.accept().unwrap();
        assert_eq!(remote, client.local_addr().unwrap());
        let peer = tcp_peer(listener.local_addr().unwrap(), remote);
        assert_eq!(
            peer,
            Peer::Process {
                pid: std::process::id(),
                uid: nix::unistd::geteuid().as_raw()
            }
        );
    }
}

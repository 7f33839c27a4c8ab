//! Whose is a loopback connection? The process that holds the socket at
//! the other end, found through /proc: its line in /proc/net/tcp (by the
//! two addresses), then the descriptor naming that socket among the
//! candidates' /proc/PID/fd. For servers that cannot be told to dial from
//! an address of their own (etcd), so that their front door can still
//! tell which of them is calling.

use std::net::{IpAddr, SocketAddr};

/// The socket inode of the TCP connection from `local` to `remote`, as the
/// dialling side sees it.
fn inode(local: SocketAddr, remote: SocketAddr) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let (l, r) = (hex(local)?, hex(remote)?);
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 9 && f[1] == l && f[2] == r).then(|| f[9].parse().ok()).flatten()
    })
}

/// An IPv4 socket address as /proc/net/tcp writes it: the address as a
/// little-endian word, the port big-endian, both in upper-case hex.
fn hex(a: SocketAddr) -> Option<String> {
    match a.ip() {
        IpAddr::V4(ip) => Some(format!("{:08X}:{:04X}", u32::from_le_bytes(ip.octets()), a.port())),
        IpAddr::V6(_) => None,
    }
}

/// Which of `candidates` (pid, what to answer) holds the dialling end of
/// the connection from `peer` to `door`.
pub(super) fn owner<T: Copy>(peer: SocketAddr, door: SocketAddr, candidates: &[(i32, T)]) -> Option<T> {
    let wanted = format!("socket:[{}]", inode(peer, door)?);
    candidates.iter().find_map(|&(pid, answer)| {
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == wanted.as_str()))
            .then_some(answer)
    })
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn the_dialling_process_is_found_by_its_socket() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let door = listener.local_addr().unwrap();
        let _client = TcpStream::connect(door).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        let me = std::process::id() as i32;
        assert_eq!(super::owner(peer, door, &[(1, 'x'), (me, 'y')]), Some('y'));
        assert_eq!(super::owner(peer, door, &[(1, 'x')]), None);
    }
}

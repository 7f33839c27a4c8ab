//! Ports for the servers the harness runs. A port is chosen before its
//! server binds it, so another process may take it in between: chosen by
//! the kernel (binding port 0), it lies in the ephemeral range, where every
//! outgoing connection of the runs beside it takes its source port too (a
//! test runs several harnesses at once, each with workers and proxies
//! dialling). So a port is drawn at random outside that range, checked free,
//! not handed out twice within the last many; and a server that still
//! finds it taken is started again on another (`ManagedServer::start`),
//! which its log tells (`says_port_taken`). A server is ready only once its
//! own process listens on the port: another server there may answer first.

use std::collections::{HashSet, VecDeque};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::ops::RangeInclusive;
use std::sync::Mutex;

use super::ServerError;

/// The lowest port handed out: those below are the system's.
const LOWEST: u16 = 1024;
/// How many ports handed out are not handed out again.
const REMEMBERED: usize = 1024;
/// Draws before giving up on finding a free port.
const DRAWS: usize = 512;

/// The ports handed out last, newest at the back.
static HANDED_OUT: Mutex<VecDeque<u16>> = Mutex::new(VecDeque::new());

/// A free port on `ip`, outside the ephemeral range.
pub(super) fn free_port(ip: Ipv4Addr) -> Result<SocketAddr, ServerError> {
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| parse_range(&text))
        // Linux's default.
        .unwrap_or(32768..=60999);
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
    for _ in 0..DRAWS {
        let port = choose(rand::random(), &ephemeral);
        if handed_out.contains(&port) {
            continue;
        }
        // Free now (std sets SO_REUSEADDR, as the servers do: a port some
        // closed connection still waits on is free to them too).
        if TcpListener::bind((ip, port)).is_ok() {
            if handed_out.len() == REMEMBERED {
                handed_out.pop_front();
            }
            handed_out.push_back(port);
            return Ok(SocketAddr::new(ip.into(), port));
        }
    }
    Err(ServerError::Port(std::io::Error::other(format!(
        "no free port on {ip} outside the ephemeral range {}-{} after {DRAWS} draws",
        ephemeral.start(),
        ephemeral.end()
    ))))
}

/// The port a random `draw` picks among those from `LOWEST` up that lie
/// outside `ephemeral` (all of them from `LOWEST` up, should it cover
/// every one).
fn choose(draw: u64, ephemeral: &RangeInclusive<u16>) -> u16 {
    // Below the range: LOWEST..start; above it: top+1..=u16::MAX.
    let start = (*ephemeral.start()).max(LOWEST);
    let top = (*ephemeral.end()).max(LOWEST - 1);
    let below = u64::from(start - LOWEST);
    let above = u64::from(u16::MAX - top);
    let outside = below + above;
    if ephemeral.is_empty() || outside == 0 {
        let all = u64::from(u16::MAX - LOWEST) + 1;
        return LOWEST + (draw % all) as u16;
    }
    let i = draw % outside;
    if i < below { LOWEST + i as u16 } else { top + 1 + (i - below) as u16 }
}

/// `ip_local_port_range`'s two numbers ("32768\t60999\n").
fn parse_range(text: &str) -> Option<RangeInclusive<u16>> {
    let mut numbers = text.split_whitespace().map(str::parse::<u16>);
    match (numbers.next(), numbers.next(), numbers.next()) {
        (Some(Ok(low)), Some(Ok(high)), None) if low <= high => Some(low..=high),
        _ => None,
    }
}

/// Does process `pid` itself listen on TCP `port` (in its own network
/// namespace)? A socket of the port in LISTEN whose inode is one of the
/// process's open files.
pub(super) fn listens_on(pid: i32, port: u16) -> bool {
    let Ok(process) = procfs::process::Process::new(pid) else { return false };
    let Ok(table) = process.tcp() else { return false };
    let listening: HashSet<u64> = table
        .iter()
        .filter(|e| e.state == procfs::net::TcpState::Listen && e.local_address.port() == port)
        .map(|e| e.inode)
        .collect();
    if listening.is_empty() {
        return false;
    }
    let Ok(fds) = process.fd() else { return false };
    fds.filter_map(Result::ok)
        .any(|fd| matches!(fd.target, procfs::process::FDTarget::Socket(inode) if listening.contains(&inode)))
}

/// Does a server's log say it could not bind its port? Redis ("bind:
/// Address already in use"), PostgreSQL ("could not bind IPv4 address
/// …: Address already in use") and etcd ("bind: address already in use")
/// all say it so.
pub(super) fn says_port_taken(log: &str) -> bool {
    log.to_ascii_lowercase().contains("address already in use")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_drawn_outside_the_ephemeral_range_and_above_the_systems() {
        let ephemeral = 32768..=60999;
        for draw in [0, 1, 31743, 31744, 31745, 36279, 36280, u64::MAX, 123_456_789] {
            let port = choose(draw, &ephemeral);
            assert!(port >= LOWEST && !ephemeral.contains(&port), "draw {draw} gave port {port}");
        }
        // Every port outside the range can be drawn: the first and last
        // below it, the first and last above it.
        assert_eq!(choose(0, &ephemeral), 1024);
        assert_eq!(choose(32767 - 1024, &ephemeral), 32767);
        assert_eq!(choose(32768 - 1024, &ephemeral), 61000);
        assert_eq!(choose(32768 - 1024 + 65535 - 61000, &ephemeral), 65535);
        assert_eq!(choose(32768 - 1024 + 65535 - 61000 + 1, &ephemeral), 1024);
    }

    #[test]
    fn a_range_that_covers_every_port_leaves_them_all_to_draw() {
        assert_eq!(choose(0, &(1..=65535)), 1024);
        assert_eq!(choose(65535 - 1024, &(1024..=65535)), 65535);
        // Ending at the top: only those below it.
        assert_eq!(choose(5, &(2000..=65535)), 1029);
        assert!(choose(u64::MAX, &(2000..=65535)) < 2000);
        // Starting below the system's ports: only those above it.
        assert_eq!(choose(0, &(10..=40000)), 40001);
        // Below the system's ports altogether: every port from LOWEST up.
        assert_eq!(choose(0, &(10..=500)), 1024);
    }

    #[test]
    fn the_kernels_range_is_read_or_refused() {
        assert_eq!(parse_range("32768\t60999\n"), Some(32768..=60999));
        assert_eq!(parse_range("1024 65535"), Some(1024..=65535));
        assert_eq!(parse_range("60999 32768"), None);
        assert_eq!(parse_range("32768"), None);
        assert_eq!(parse_range("1 2 3"), None);
        assert_eq!(parse_range("x 2"), None);
    }

    #[test]
    fn a_port_handed_out_is_free_and_not_handed_out_again_soon() {
        let ports: Vec<u16> = (0..64).map(|_| free_port(Ipv4Addr::LOCALHOST).unwrap().port()).collect();
        let distinct: HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
    }

    #[test]
    fn a_process_listening_on_a_port_is_told_from_one_that_does_not() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = std::process::id() as i32;
        assert!(listens_on(me, port));
        // Our parent (the test runner's, or a shell) does not hold it.
        assert!(!listens_on(nix::unistd::getppid().as_raw(), port));
        drop(listener);
        assert!(!listens_on(me, port));
    }

    #[test]
    fn each_servers_words_for_a_port_taken_are_known() {
        assert!(says_port_taken(
            "1:M 05 Dec 2026 # Warning: Could not create server TCP listening socket 127.0.0.1:4000: bind: Address already in use"
        ));
        assert!(says_port_taken("LOG:  could not bind IPv4 address \"127.0.0.1\": Address already in use"));
        assert!(says_port_taken("{\"msg\":\"listen tcp 127.0.0.1:4000: bind: address already in use\"}"));
        assert!(!says_port_taken("Ready to accept connections tcp"));
    }
}

//! The proxy against a real echo server on loopback.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::*;

/// An echo server that counts the bytes it received.
fn echo() -> (SocketAddr, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Arc::new(AtomicU64::new(0));
    let count = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let count = count.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        return;
                    }
                    count.fetch_add(n as u64, Ordering::SeqCst);
                }
            });
        }
    });
    (addr, received)
}

fn client(proxy: &Proxy, link: usize) -> TcpStream {
    let s = TcpStream::connect(proxy.address(link)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(150))).unwrap();
    s
}

/// Send `msg` and read the echo; Err(kind) if none came.
fn round_trip(s: &mut TcpStream, msg: &[u8]) -> Result<Vec<u8>, ErrorKind> {
    s.write_all(msg).map_err(|e| e.kind())?;
    let mut buf = vec![0u8; msg.len()];
    match s.read_exact(&mut buf) {
        Ok(()) => Ok(buf),
        Err(e) => Err(e.kind()),
    }
}

fn silent(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

#[test]
fn a_link_relays_both_ways_and_counts() {
    let (server, _) = echo();
    let proxy = Proxy::start(server, 2, 1).unwrap();
    for link in 0..2 {
        let mut s = client(&proxy, link);
        assert_eq!(round_trip(&mut s, b"ping").unwrap(), b"ping");
    }
    let stats = proxy.stop();
    assert_eq!(stats.len(), 2);
    assert!(stats.iter().all(|l| l.connections == 1 && l.bytes_up == 4 && l.bytes_down == 4), "{stats:?}");
}

#[test]
fn a_partition_is_silent_until_heal_then_delivers() {
    let (server, received) = echo();
    let proxy = Proxy::start(server, 2, 1).unwrap();
    let mut s = client(&proxy, 0);
    let mut other = client(&proxy, 1);
    assert_eq!(round_trip(&mut s, b"a").unwrap(), b"a");
    proxy.apply(0, Toxic::Partition, 1.0).unwrap();
    assert!(silent(round_trip(&mut s, b"b").unwrap_err()), "nothing comes back, nothing is refused");
    // A new connection is accepted, and hangs too.
    let mut late = client(&proxy, 0);
    assert!(silent(round_trip(&mut late, b"c").unwrap_err()));
    assert_eq!(received.load(Ordering::SeqCst), 1, "the server heard nothing of the partitioned side");
    assert_eq!(round_trip(&mut other, b"d").unwrap(), b"d", "the other link is untouched");
    proxy.heal(0).unwrap();
    let mut buf = [0u8; 1];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"b", "held bytes arrive after heal, like a retransmission");
    late.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"c");
}

/// A connection to `to` from the loopback address `from`.
fn client_from(from: &str, to: SocketAddr) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    sock.bind(&local.into()).unwrap();
    sock.connect(&to.into()).unwrap();
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_millis(150))).unwrap();
    s
}

#[test]
fn a_door_routes_each_connection_to_the_link_of_the_address_it_comes_from() {
    let (server, _) = echo();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let door = Door {
        listen: "127.0.0.1:0".parse().unwrap(),
        upstream: server,
        route: Route::BySource { sources: vec![(ip("127.0.0.12"), 0), (ip("127.0.0.13"), 1)], otherwise: 2 },
    };
    let proxy = Proxy::start_doors(vec![door], 3, 1).unwrap();
    let at = proxy.address(0);
    let (mut a, mut b, mut c) =
        (client_from("127.0.0.12", at), client_from("127.0.0.13", at), client_from("127.0.0.1", at));
    proxy.apply(1, Toxic::Partition, 1.0).unwrap();
    assert_eq!(round_trip(&mut a, b"a").unwrap(), b"a");
    assert!(silent(round_trip(&mut b, b"b").unwrap_err()), "the connection from .13 is on the cut link");
    assert_eq!(round_trip(&mut c, b"c").unwrap(), b"c", "an unknown address is on the link for the rest");
    proxy.heal(1).unwrap();
    let mut buf = [0u8; 1];
    b.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"b");
}

#[test]
fn lost_replies_reach_the_server_and_the_connection_is_reset_at_heal() {
    let (server, received) = echo();
    let proxy = Proxy::start(server, 1, 1).unwrap();
    let mut s = client(&proxy, 0);
    assert_eq!(round_trip(&mut s, b"a").unwrap(), b"a");
    proxy.apply(0, Toxic::PartitionReplies, 1.0).unwrap();
    assert!(silent(round_trip(&mut s, b"renew").unwrap_err()));
    assert_eq!(received.load(Ordering::SeqCst), 6, "the request took effect");
    proxy.heal(0).unwrap();
    let mut buf = [0u8; 8];
    let after = s.read(&mut buf);
    assert!(
        matches!(&after, Err(e) if e.kind() == ErrorKind::ConnectionReset),
        "the stream cannot skip what was lost: {after:?}"
    );
    let mut fresh = client(&proxy, 0);
    assert_eq!(round_trip(&mut fresh, b"x").unwrap(), b"x");
    let stats = proxy.stop();
    assert_eq!((stats[0].replies_lost_bytes, stats[0].resets), (5, 1));
    assert_eq!(stats[0].reply_losses.len(), 1);
}

#[test]
fn a_delay_adds_its_latency_per_direction() {
    let (server, _) = echo();
    let proxy = Proxy::start(server, 1, 1).unwrap();
    let mut s = client(&proxy, 0);
    let latency = Duration::from_millis(40);
    let delay = |direction| Toxic::Delay { latency, jitter: Duration::from_millis(5), direction };
    let timed = |s: &mut TcpStream| {
        let t = Instant::now();
        assert_eq!(round_trip(s, b"p").unwrap(), b"p");
        t.elapsed()
    };
    assert!(timed(&mut s) < Duration::from_millis(20));
    proxy.apply(0, delay(Direction::Replies), 1.0).unwrap();
    let one = timed(&mut s);
    assert!(one >= Duration::from_millis(35) && one < Duration::from_millis(75), "{one:?}");
    proxy.apply(0, delay(Direction::Both), 1.0).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let both = timed(&mut s);
    assert!(both >= Duration::from_millis(70) && both < Duration::from_millis(120), "{both:?}");
    proxy.heal(0).unwrap();
    assert!(timed(&mut s) < Duration::from_millis(20));
}

#[test]
fn a_reply_delayed_past_its_worker_is_counted_lost() {
    let (server, received) = echo();
    let proxy = Proxy::start(server, 1, 1).unwrap();
    let latency = Duration::from_millis(100);
    proxy.apply(0, Toxic::Delay { latency, jitter: Duration::ZERO, direction: Direction::Replies }, 1.0).unwrap();
    let mut s = client(&proxy, 0);
    s.write_all(b"renew").unwrap();
    // The worker gives up before the reply comes, and closes.
    std::thread::sleep(Duration::from_millis(20));
    drop(s);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(received.load(Ordering::SeqCst), 5, "the request took effect");
    let stats = proxy.stop();
    assert_eq!(stats[0].reply_losses.len(), 1, "{stats:?}");
}

#[test]
fn a_reset_resets_open_and_new_connections_until_heal() {
    let (server, _) = echo();
    let proxy = Proxy::start(server, 1, 1).unwrap();
    let mut s = client(&proxy, 0);
    assert_eq!(round_trip(&mut s, b"a").unwrap(), b"a");
    proxy.apply(0, Toxic::Reset, 1.0).unwrap();
    let kind = round_trip(&mut s, b"b").unwrap_err();
    assert!(matches!(kind, ErrorKind::ConnectionReset | ErrorKind::BrokenPipe), "{kind:?}");
    let mut new = client(&proxy, 0);
    let kind = round_trip(&mut new, b"c").unwrap_err();
    assert!(matches!(kind, ErrorKind::ConnectionReset | ErrorKind::BrokenPipe | ErrorKind::UnexpectedEof), "{kind:?}");
    proxy.heal(0).unwrap();
    let mut healed = client(&proxy, 0);
    assert_eq!(round_trip(&mut healed, b"d").unwrap(), b"d");
}

#[test]
fn toxicity_picks_a_fraction_of_connections() {
    let (server, _) = echo();
    let proxy = Proxy::start(server, 1, 7).unwrap();
    proxy.apply(0, Toxic::Partition, 0.5).unwrap();
    let mut conns: Vec<TcpStream> = (0..40).map(|_| client(&proxy, 0)).collect();
    let answered = conns.iter_mut().map(|s| round_trip(s, b"q").is_ok()).filter(|ok| *ok).count();
    assert!((8..=32).contains(&answered), "{answered} of 40 answered at toxicity 0.5");
}

#[test]
fn a_refused_upstream_is_a_reset_for_the_worker() {
    // A port nobody listens on.
    let gone = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let proxy = Proxy::start(gone, 1, 1).unwrap();
    let mut s = client(&proxy, 0);
    let kind = round_trip(&mut s, b"a").unwrap_err();
    assert!(matches!(kind, ErrorKind::ConnectionReset | ErrorKind::BrokenPipe | ErrorKind::UnexpectedEof), "{kind:?}");
}

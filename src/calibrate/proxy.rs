//! What the harness's proxy costs: the round trip it adds on loopback
//! (against the same echo server reached directly), and whether it carries
//! a thousand workers' connections open at once.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Instant;

use super::delays::summarize;
use crate::model::calibration::Delay;
use crate::proxy::Proxy;

/// An echo server on loopback, a thread per connection (a calibration's
/// few hundred or thousand connections).
fn echo() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let _ = s.set_nodelay(true);
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// One small request and its reply, µs.
fn round_trip(s: &mut TcpStream) -> std::io::Result<f64> {
    let mut buf = [0u8; 16];
    let start = Instant::now();
    s.write_all(&buf)?;
    s.read_exact(&mut buf)?;
    Ok(start.elapsed().as_secs_f64() * 1e6)
}

fn series(to: SocketAddr, n: usize) -> std::io::Result<Vec<f64>> {
    let mut s = TcpStream::connect(to)?;
    s.set_nodelay(true)?;
    // Warm the path (first-use page faults, the scheduler's placement).
    for _ in 0..20 {
        round_trip(&mut s)?;
    }
    (0..n).map(|_| round_trip(&mut s)).collect()
}

/// `n` round trips straight to an echo server, then `n` through one link
/// of the proxy: (direct, proxied). The proxy's cost per hop is the
/// difference.
pub fn round_trips(n: usize) -> Option<(Delay, Delay)> {
    let server = echo().ok()?;
    let proxy = Proxy::start(server, 1, 1).ok()?;
    let direct = summarize(series(server, n).ok()?)?;
    let proxied = summarize(series(proxy.address(0), n).ok()?)?;
    Some((direct, proxied))
}

/// `links` links with a connection open on each, all at once; then a round
/// trip on each in turn: their spread says the proxy carries them all.
pub fn carry(links: usize) -> Result<Delay, String> {
    crate::trial::ensure_limits(&crate::trial::Demand { workers: links, jobs: 1, proxied: true, clock_moved: false })
        .map_err(|e| e.to_string())?;
    let server = echo().map_err(|e| e.to_string())?;
    let proxy = Proxy::start(server, links, 1).map_err(|e| e.to_string())?;
    // Opened one after another, each used once: the echo server's accept
    // backlog (128) is not what is measured.
    let mut conns = (0..links)
        .map(|i| {
            let mut s = TcpStream::connect(proxy.address(i))?;
            s.set_nodelay(true)?;
            round_trip(&mut s)?;
            Ok(s)
        })
        .collect::<std::io::Result<Vec<TcpStream>>>()
        .map_err(|e| format!("opening {links} connections: {e}"))?;
    let times = conns.iter_mut().map(round_trip).collect::<std::io::Result<Vec<f64>>>().map_err(|e| e.to_string())?;
    summarize(times).ok_or_else(|| "no round trip".into())
}

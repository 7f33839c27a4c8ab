//! Server addresses as URLs (`redis://127.0.0.1:6379/`,
//! `postgres://postgres@127.0.0.1:5432/test`): where the server listens,
//! and the same address pointed at a proxy link instead.

use std::net::{SocketAddr, ToSocketAddrs};

/// The parts of `scheme://[user@]host[:port][/rest]`.
struct Url<'a> {
    scheme: &'a str,
    user: Option<&'a str>,
    host: &'a str,
    port: Option<u16>,
    rest: &'a str,
}

fn parse(address: &str) -> Result<Url<'_>, String> {
    let (scheme, after) = address
        .split_once("://")
        .ok_or_else(|| format!("{address:?}: the proxy needs a URL address (redis://host:port/, postgres://…)"))?;
    let (authority, rest) = match after.find('/') {
        Some(i) => after.split_at(i),
        None => (after, ""),
    };
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let (host, port) = if hostport.starts_with('[') {
        // [::1]:6379
        let end = hostport.find(']').ok_or_else(|| format!("{address:?}: unclosed [ in the host"))?;
        let port = hostport[end + 1..].strip_prefix(':');
        (&hostport[..=end], port)
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let port = port.map(|p| p.parse::<u16>().map_err(|_| format!("{address:?}: bad port {p:?}"))).transpose()?;
    if host.is_empty() {
        return Err(format!("{address:?}: no host (a Unix socket cannot be proxied; give the server's TCP address)"));
    }
    Ok(Url { scheme, user, host, port, rest })
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "redis" => Some(6379),
        "postgres" | "postgresql" => Some(5432),
        _ => None,
    }
}

/// Where the server of `address` listens (its host resolved).
pub fn endpoint(address: &str) -> Result<SocketAddr, String> {
    let url = parse(address)?;
    let port = url
        .port
        .or_else(|| default_port(url.scheme))
        .ok_or_else(|| format!("{address:?}: no port, and none is known for {:?}", url.scheme))?;
    let host = url.host.trim_start_matches('[').trim_end_matches(']');
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{address:?}: cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{address:?}: {host} resolves to no address"))
}

/// `address` with its host and port replaced by `to` (user, database and
/// options kept).
pub fn with_endpoint(address: &str, to: SocketAddr) -> Result<String, String> {
    let url = parse(address)?;
    let user = url.user.map(|u| format!("{u}@")).unwrap_or_default();
    Ok(format!("{}://{user}{to}{}", url.scheme, url.rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_pointed_at_a_link_keeping_user_and_database() {
        let to: SocketAddr = "127.0.0.1:40001".parse().unwrap();
        assert_eq!(with_endpoint("redis://127.0.0.1:6379/", to).unwrap(), "redis://127.0.0.1:40001/");
        assert_eq!(
            with_endpoint("postgres://postgres@127.0.0.1:5432/test?sslmode=disable", to).unwrap(),
            "postgres://postgres@127.0.0.1:40001/test?sslmode=disable"
        );
        assert_eq!(with_endpoint("redis://localhost", to).unwrap(), "redis://127.0.0.1:40001");
        assert_eq!(endpoint("postgres://postgres@127.0.0.1/test").unwrap(), "127.0.0.1:5432".parse().unwrap());
        assert_eq!(endpoint("redis://[::1]:7000/").unwrap(), "[::1]:7000".parse().unwrap());
        assert!(endpoint("host=/var/run/postgresql user=postgres").unwrap_err().contains("URL"));
        assert!(endpoint("postgres://postgres@/test").unwrap_err().contains("Unix socket"));
        assert!(endpoint("redis://127.0.0.1:99999/").unwrap_err().contains("bad port"));
    }
}

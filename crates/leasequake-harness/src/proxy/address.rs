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

/// An address the proxy cannot stand in front of, and why.
#[derive(Debug, thiserror::Error)]
#[error("{address:?}: {problem}")]
pub struct AddressError {
    pub address: String,
    pub problem: Problem,
}

#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("the proxy needs a URL address (redis://host:port/, postgres://…)")]
    NotUrl,
    #[error("unclosed [ in the host")]
    Unclosed,
    #[error("bad port {0:?}")]
    BadPort(String),
    #[error("no host (a Unix socket cannot be proxied; give the server's TCP address)")]
    NoHost,
    #[error("no port, and none is known for {0:?}")]
    NoPort(String),
    #[error("cannot resolve {host}: {source}")]
    Resolve { host: String, source: std::io::Error },
    #[error("{0} resolves to no address")]
    NoAddress(String),
}

fn parse(address: &str) -> Result<Url<'_>, AddressError> {
    let bad = |problem| AddressError { address: address.to_string(), problem };
    let (scheme, after) = address.split_once("://").ok_or_else(|| bad(Problem::NotUrl))?;
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
        let end = hostport.find(']').ok_or_else(|| bad(Problem::Unclosed))?;
        let port = hostport[end + 1..].strip_prefix(':');
        (&hostport[..=end], port)
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let port = port.map(|p| p.parse::<u16>().map_err(|_| bad(Problem::BadPort(p.to_string())))).transpose()?;
    if host.is_empty() {
        return Err(bad(Problem::NoHost));
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
pub fn endpoint(address: &str) -> Result<SocketAddr, AddressError> {
    let bad = |problem| AddressError { address: address.to_string(), problem };
    let url = parse(address)?;
    let port = url.port.or_else(|| default_port(url.scheme)).ok_or_else(|| bad(Problem::NoPort(url.scheme.into())))?;
    let host = url.host.trim_start_matches('[').trim_end_matches(']');
    (host, port)
        .to_socket_addrs()
        .map_err(|source| bad(Problem::Resolve { host: host.to_string(), source }))?
        .next()
        .ok_or_else(|| bad(Problem::NoAddress(host.to_string())))
}

/// `address` with its host and port replaced by `to` (user, database and
/// options kept).
pub fn with_endpoint(address: &str, to: SocketAddr) -> Result<String, AddressError> {
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
        let problem = |address| endpoint(address).unwrap_err().problem;
        assert!(matches!(problem("host=/var/run/postgresql user=postgres"), Problem::NotUrl));
        assert!(matches!(problem("postgres://postgres@/test"), Problem::NoHost));
        assert!(matches!(problem("redis://127.0.0.1:99999/"), Problem::BadPort(p) if p == "99999"));
        assert_eq!(
            endpoint("redis://127.0.0.1:99999/").unwrap_err().to_string(),
            "\"redis://127.0.0.1:99999/\": bad port \"99999\"",
            "the message names the address, as a trial's error says it"
        );
    }
}

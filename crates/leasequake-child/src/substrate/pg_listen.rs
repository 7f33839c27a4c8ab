//! PostgreSQL's LISTEN for a push watcher: a session of its own, listening
//! on the lease's channel, whose socket the worker waits on beside its
//! signals. A holder's release notifies the channel in the same statement
//! (`pg_notify`), so the NOTIFY is delivered when the release commits.
//! Nothing notifies an expiry: a lease row's `expires_at` passing is no
//! event in the database, so watchers still find it at a tick.

use std::future::{Future, poll_fn};
use std::io;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio_postgres::config::Host;
use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::{AsyncMessage, Client, Config, Connection, NoTls};

/// The channel a lease's release is announced on: an identifier of at most
/// 63 bytes, whatever the lease's name (both ends compute it in SQL).
pub const CHANNEL_SQL: &str = "'leasequake_' || md5($1)";

type Conn = Connection<tokio::net::TcpStream, NoTlsStream>;

/// One listening session.
pub struct Listener {
    _client: Client,
    conn: Conn,
    fd: RawFd,
}

fn pg_err(e: tokio_postgres::Error) -> io::Error {
    io::Error::other(format!("postgres: {e}"))
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "postgres: no reply within the request timeout")
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "postgres: the listening session closed")
}

/// Take every message the connection has ready, counting notifications in
/// `told`: an error if it broke or closed, Pending once nothing more is
/// ready (the runtime then wakes the task when there is).
fn drain(conn: &mut Conn, cx: &mut Context<'_>, told: &mut usize) -> Poll<io::Result<()>> {
    loop {
        match conn.poll_message(cx) {
            Poll::Ready(Some(Ok(AsyncMessage::Notification(_)))) => *told += 1,
            Poll::Ready(Some(Ok(_))) => {}
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(pg_err(e))),
            Poll::Ready(None) => return Poll::Ready(Err(closed())),
            Poll::Pending => return Poll::Pending,
        }
    }
}

/// Drive `conn` (its replies, and any notification, counted in `told`)
/// until `fut` is done.
async fn driving<T>(conn: &mut Conn, fut: impl Future<Output = T>, told: &mut usize) -> io::Result<T> {
    let mut fut = pin!(fut);
    poll_fn(|cx| {
        if let Poll::Ready(Err(e)) = drain(conn, cx, told) {
            return Poll::Ready(Err(e));
        }
        fut.as_mut().poll(cx).map(Ok)
    })
    .await
}

impl Listener {
    /// Listen on `key`'s channel, within `limit`.
    pub fn listen(rt: &tokio::runtime::Runtime, config: &Config, key: &str, limit: Duration) -> io::Result<Listener> {
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let host = match config.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            _ => return Err(io::Error::other("postgres: push needs a TCP address (host:port)")),
        };
        let socket = (host.as_str(), port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::other(format!("postgres: {host} has no address")))?;
        let std_stream = TcpStream::connect_timeout(&socket, limit)?;
        std_stream.set_nodelay(true)?;
        std_stream.set_nonblocking(true)?;
        let fd = std_stream.as_raw_fd();
        let key = key.to_string();
        rt.block_on(async {
            let set_up = async {
                let stream = tokio::net::TcpStream::from_std(std_stream)?;
                let (client, mut conn) = config.connect_raw(stream, NoTls).await.map_err(pg_err)?;
                let mut told = 0;
                let (select, params) =
                    (format!("SELECT {CHANNEL_SQL}"), [&key as &(dyn tokio_postgres::types::ToSql + Sync)]);
                let query = client.query_one(&select, &params);
                let channel: String = driving(&mut conn, query, &mut told).await?.map_err(pg_err)?.get(0);
                let listen_sql = format!("LISTEN \"{channel}\"");
                let listen = client.batch_execute(&listen_sql);
                driving(&mut conn, listen, &mut told).await?.map_err(pg_err)?;
                Ok(Listener { _client: client, conn, fd })
            };
            tokio::time::timeout(limit, set_up).await.unwrap_or_else(|_| Err(timed_out()))
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// How many notifications arrived since the last call. Called when the
    /// socket is readable: waits a little for the runtime to see what the
    /// worker's poll saw, never longer than `patience`.
    pub fn notified(&mut self, rt: &tokio::runtime::Runtime, patience: Duration) -> io::Result<usize> {
        let mut told = 0;
        let result = rt.block_on(async {
            let read = poll_fn(|cx| match drain(&mut self.conn, cx, &mut told) {
                Poll::Ready(result) => Poll::Ready(result),
                // Nothing yet: park once, so that the runtime polls the
                // socket the worker saw readable.
                Poll::Pending if told == 0 => Poll::Pending,
                Poll::Pending => Poll::Ready(Ok(())),
            });
            tokio::time::timeout(patience, read).await.unwrap_or(Ok(()))
        });
        result.map(|()| told)
    }
}

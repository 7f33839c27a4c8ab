//! PostgreSQL as a `Substrate`, two ways.
//!
//! * Lease row: one row per lease in `leasequake_leases`, its `expires_at`
//!   judged by the server's `now()`. Acquire and takeover are one
//!   statement, an insert that on conflict updates only an expired row; the
//!   token is the row's generation, so it survives restarts.
//! * Advisory lock: `pg_try_advisory_lock`, held by the holder's session.
//!   The server drops it when the session ends (a killed holder's
//!   connection closes), and never otherwise: like flock, no expiry. The row
//!   still names the holder and counts the generations.
//!
//! Push (`watch_by: push`): a release notifies the lease's channel in the
//! same statement, and a push watcher LISTENs on it (`pg_listen.rs`).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use postgres::{Client, NoTls};
use tokio_postgres::Statement;

use super::lease::{Pushed, Renewal, Seen, Substrate};
use super::lockfile::{Lease, ReadError};
use super::pg_listen::Listener;

/// The harness creates it before a run (see `ensure_table`).
pub const TABLE: &str = "leasequake_leases";

const GRANT: &str = "INSERT INTO leasequake_leases AS l (name, holder, token, expires_at) \
     VALUES ($1, $2, 1, now() + $3::float8 * interval '1 millisecond') \
     ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, token = l.token + 1, expires_at = EXCLUDED.expires_at \
     WHERE l.expires_at < now() OR $4 \
     RETURNING token, extract(epoch from expires_at)::float8";

const OBSERVE: &str = "SELECT holder, token, extract(epoch from expires_at)::float8, expires_at < now() \
     FROM leasequake_leases WHERE name = $1";

const RENEW: &str = "UPDATE leasequake_leases SET expires_at = now() + $4::float8 * interval '1 millisecond' \
     WHERE name = $1 AND holder = $2 AND token = $3 \
     RETURNING extract(epoch from expires_at)::float8";

/// A release, announced to push watchers when it commits.
const RELEASE: &str = "WITH released AS (UPDATE leasequake_leases SET expires_at = '-infinity' \
     WHERE name = $1 AND holder = $2 AND token = $3 RETURNING name) \
     SELECT pg_notify('leasequake_' || md5(name), 'released') FROM released";

fn err(e: postgres::Error) -> io::Error {
    // The server's own words ("db error" alone says nothing).
    match e.as_db_error() {
        Some(db) => io::Error::other(format!("postgres: {} ({})", db.message(), db.code().code())),
        None => io::Error::other(format!("postgres: {e}")),
    }
}

/// Create the lease table if it is missing (once per run, by the harness:
/// concurrent `CREATE TABLE IF NOT EXISTS` can fail in PostgreSQL).
pub fn ensure_table(address: &str) -> io::Result<()> {
    let mut client = Client::connect(address, NoTls).map_err(err)?;
    // Two runs creating the table at once race inside PostgreSQL (IF NOT
    // EXISTS is not atomic: the loser fails on a unique index of the
    // catalog). A transaction-scoped advisory lock makes them take turns.
    client
        .batch_execute(
            "BEGIN; SELECT pg_advisory_xact_lock(7418230513); \
             CREATE TABLE IF NOT EXISTS leasequake_leases \
             (name text PRIMARY KEY, holder bigint NOT NULL, token bigint NOT NULL, expires_at timestamptz NOT NULL); \
             COMMIT;",
        )
        .map_err(err)
}

/// Remove one trial's lease row (after the trial).
pub fn drop_lease(address: &str, key: &str) -> io::Result<()> {
    let mut client = Client::connect(address, NoTls).map_err(err)?;
    client.execute("DELETE FROM leasequake_leases WHERE name = $1", &[&key]).map(|_| ()).map_err(err)
}

pub struct PgLease {
    /// One thread's runtime: every operation runs inside `block_on`, under
    /// a timeout that covers connecting and the statement (the blocking
    /// client has no timeout on a statement whose reply never comes).
    rt: tokio::runtime::Runtime,
    config: tokio_postgres::Config,
    client: Option<Session>,
    key: String,
    ttl_ms: f64,
    timeout: Duration,
    /// A shorter limit for the next operations (`Substrate::set_budget`).
    budget: Option<Duration>,
    advisory: bool,
    /// Our grant (pid, token) while we hold the lease.
    mine: Option<(i64, i64)>,
    /// The push subscription, while there is one.
    listener: Option<Listener>,
    /// Found before the first notification: the lease was free by the time
    /// the subscription began.
    gone_already: bool,
}

/// A connection: the client, its prepared statements, and the task that
/// drives its socket.
struct Session {
    client: Arc<tokio_postgres::Client>,
    sql: Arc<Prepared>,
    driver: tokio::task::JoinHandle<()>,
}

const TRY_LOCK: &str = "SELECT pg_try_advisory_lock(hashtext($1))";
const UNLOCK: &str = "SELECT pg_advisory_unlock(hashtext($1))";
/// The holder's unlock, announced to push watchers (a watcher's probe
/// unlocks with `UNLOCK`, silently).
const UNLOCK_RELEASE: &str =
    "SELECT pg_advisory_unlock(hashtext($1)), pg_notify('leasequake_' || md5($1::text), 'released')";
/// Does this session hold an advisory lock? (It takes no other.)
const HELD: &str = "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()";

/// Every statement, prepared once per connection, as a client with a
/// statement cache would: an operation is then one round trip, so a
/// request whose reply is lost has still reached the server (unprepared,
/// the client would wait for the Parse reply and never send it).
struct Prepared {
    grant: Statement,
    observe: Statement,
    renew: Statement,
    release: Statement,
    try_lock: Statement,
    unlock: Statement,
    unlock_release: Statement,
    held: Statement,
}

impl Prepared {
    async fn new(c: &tokio_postgres::Client) -> Result<Prepared, tokio_postgres::Error> {
        Ok(Prepared {
            grant: c.prepare(GRANT).await?,
            observe: c.prepare(OBSERVE).await?,
            renew: c.prepare(RENEW).await?,
            release: c.prepare(RELEASE).await?,
            try_lock: c.prepare(TRY_LOCK).await?,
            unlock: c.prepare(UNLOCK).await?,
            unlock_release: c.prepare(UNLOCK_RELEASE).await?,
            held: c.prepare(HELD).await?,
        })
    }
}

fn pg_err(e: tokio_postgres::Error) -> io::Error {
    match e.as_db_error() {
        Some(db) => io::Error::other(format!("postgres: {} ({})", db.message(), db.code().code())),
        None => io::Error::other(format!("postgres: {e}")),
    }
}

impl PgLease {
    pub fn connect(
        address: &str,
        key: &str,
        ttl: Duration,
        timeout: Option<Duration>,
        advisory: bool,
    ) -> io::Result<PgLease> {
        let timeout = timeout.unwrap_or((ttl / 3).max(Duration::from_millis(50)));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let config: tokio_postgres::Config = address.parse().map_err(pg_err)?;
        Ok(PgLease {
            rt,
            config,
            client: None,
            key: key.to_string(),
            ttl_ms: ttl.as_secs_f64() * 1000.0,
            timeout: timeout.max(Duration::from_millis(1)),
            budget: None,
            advisory,
            mine: None,
            listener: None,
            gone_already: false,
        })
    }

    /// Run `op` on the connection (opened first if need be), all of it
    /// within the request timeout; forget the connection after an error,
    /// closing its socket (a session that timed out is not trusted again).
    fn with<T, F, Fut>(&mut self, op: F) -> io::Result<T>
    where
        F: FnOnce(Arc<tokio_postgres::Client>, Arc<Prepared>) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let limit = self.budget.map_or(self.timeout, |b| b.min(self.timeout));
        let deadline = tokio::time::Instant::now() + limit;
        let result = self.rt.block_on(async {
            if self.client.is_none() {
                let connecting = tokio::time::timeout_at(deadline, self.config.connect(tokio_postgres::NoTls));
                let (client, connection) = match connecting.await {
                    Ok(r) => r.map_err(pg_err)?,
                    Err(_) => return Err(timed_out()),
                };
                let driver = tokio::spawn(async move {
                    let _ = connection.await;
                });
                let ms = self.timeout.as_millis().max(1);
                let set_up = async {
                    client.batch_execute(&format!("SET statement_timeout = {ms}")).await?;
                    Prepared::new(&client).await
                };
                let sql = match tokio::time::timeout_at(deadline, set_up).await {
                    Ok(r) => r.map_err(pg_err),
                    Err(_) => Err(timed_out()),
                };
                let sql = match sql {
                    Ok(sql) => sql,
                    Err(e) => {
                        driver.abort();
                        return Err(e);
                    }
                };
                self.client = Some(Session { client: Arc::new(client), sql: Arc::new(sql), driver });
            }
            let session = self.client.as_ref().expect("connected above");
            match tokio::time::timeout_at(deadline, op(session.client.clone(), session.sql.clone())).await {
                Ok(r) => r.map_err(pg_err),
                Err(_) => Err(timed_out()),
            }
        });
        if result.is_err()
            && let Some(session) = self.client.take()
        {
            session.driver.abort();
            drop(session.client);
            // Let the runtime drop the aborted task, and with it the socket.
            self.rt.block_on(tokio::task::yield_now());
        }
        result
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "postgres: no reply within the request timeout")
}

impl Substrate for PgLease {
    fn acquire(&mut self, fresh: Lease, _seen_token: u64) -> io::Result<Option<Lease>> {
        let (key, pid, ttl) = (self.key.clone(), fresh.process_id, self.ttl_ms);
        if self.advisory {
            let id = self.key.clone();
            let locked: bool =
                self.with(move |c, q| async move { c.query_one(&q.try_lock, &[&id]).await.map(|r| r.get(0)) })?;
            if !locked {
                return Ok(None);
            }
            // Ours: count the generation (the row's expiry is not used).
            let row = self.with(move |c, q| async move { c.query_one(&q.grant, &[&key, &pid, &ttl, &true]).await })?;
            let token: i64 = row.get(0);
            self.mine = Some((pid, token));
            return Ok(Some(Lease { token: Some(token as u64), ..fresh }));
        }
        let row = self.with(move |c, q| async move { c.query_opt(&q.grant, &[&key, &pid, &ttl, &false]).await })?;
        Ok(row.map(|row| {
            let token: i64 = row.get(0);
            self.mine = Some((pid, token));
            Lease { process_id: pid, lease_until: row.get(1), token: Some(token as u64) }
        }))
    }

    fn observe(&mut self) -> Result<Seen, ReadError> {
        if self.advisory {
            let id = self.key.clone();
            let free: bool = self
                .with(move |c, q| async move {
                    let got: bool = c.query_one(&q.try_lock, &[&id]).await?.get(0);
                    if got {
                        c.execute(&q.unlock, &[&id]).await?;
                    }
                    Ok(got)
                })
                .map_err(ReadError::Io)?;
            if free {
                return Ok(Seen::Free);
            }
        }
        let key = self.key.clone();
        let row =
            self.with(move |c, q| async move { c.query_opt(&q.observe, &[&key]).await }).map_err(ReadError::Io)?;
        let Some(row) = row else {
            return if self.advisory { Err(ReadError::Empty) } else { Ok(Seen::Free) };
        };
        let lease = Lease {
            process_id: row.get(0),
            token: Some(row.get::<_, i64>(1) as u64),
            lease_until: row.get::<_, f64>(2),
        };
        if !self.advisory && !lease.lease_until.is_finite() {
            // Released (expires_at = -infinity; the row stays to keep the
            // generation count): free.
            return Ok(Seen::Free);
        }
        let expired: bool = row.get(3);
        // Under advisory locks only the lock decides: it is held.
        Ok(if expired && !self.advisory { Seen::Expired(lease) } else { Seen::Held(lease) })
    }

    fn renew(&mut self, fresh: Lease) -> Result<Renewal, ReadError> {
        let Some((pid, token)) = self.mine else { return Ok(Renewal::Lost { holder: None }) };
        let key = self.key.clone();
        if self.advisory {
            // The lock lasts as long as the session: check that it does.
            let held: bool = self
                .with(|c, q| async move { c.query_one(&q.held, &[]).await.map(|r| r.get(0)) })
                .map_err(ReadError::Io)?;
            if held {
                return Ok(Renewal::Renewed(Lease { token: Some(token as u64), ..fresh }));
            }
            self.mine = None;
            return Ok(Renewal::Lost { holder: None });
        }
        let ttl = self.ttl_ms;
        let row = self
            .with(move |c, q| async move { c.query_opt(&q.renew, &[&key, &pid, &token, &ttl]).await })
            .map_err(ReadError::Io)?;
        match row {
            Some(row) => {
                Ok(Renewal::Renewed(Lease { process_id: pid, lease_until: row.get(0), token: Some(token as u64) }))
            }
            None => {
                self.mine = None;
                let holder = match self.observe()? {
                    Seen::Held(l) | Seen::Expired(l) => Some(l.process_id),
                    Seen::Free => None,
                };
                Ok(Renewal::Lost { holder })
            }
        }
    }

    fn take_over(&mut self, fresh: Lease, seen_token: u64) -> io::Result<Option<Lease>> {
        self.acquire(fresh, seen_token)
    }

    fn release(&mut self, _pid: i64) -> io::Result<()> {
        let Some((pid, token)) = self.mine.take() else { return Ok(()) };
        let key = self.key.clone();
        if self.advisory {
            let id = self.key.clone();
            return self.with(move |c, q| async move { c.execute(&q.unlock_release, &[&id]).await.map(|_| ()) });
        }
        self.with(move |c, q| async move { c.execute(&q.release, &[&key, &pid, &token]).await.map(|_| ()) })
    }

    fn set_budget(&mut self, budget: Option<Duration>) {
        self.budget = budget;
    }

    fn subscribe(&mut self) -> io::Result<()> {
        if self.listener.is_none() {
            let limit = self.budget.map_or(self.timeout, |b| b.min(self.timeout));
            self.listener = Some(Listener::listen(&self.rt, &self.config, &self.key, limit)?);
            // Released between the last look and the LISTEN: no
            // notification will say so.
            self.gone_already = matches!(self.observe(), Ok(Seen::Free));
        }
        Ok(())
    }

    fn subscribed(&self) -> Option<std::os::fd::RawFd> {
        self.listener.as_ref().map(Listener::fd)
    }

    fn pushed(&mut self) -> io::Result<Pushed> {
        if std::mem::take(&mut self.gone_already) {
            return Ok(Pushed::Gone("missing"));
        }
        let Some(listener) = self.listener.as_mut() else { return Ok(Pushed::Nothing) };
        match listener.notified(&self.rt, Duration::from_millis(10)) {
            Ok(0) => Ok(Pushed::Nothing),
            Ok(_) => Ok(Pushed::Gone("released")),
            Err(e) => {
                self.listener = None;
                Err(e)
            }
        }
    }

    fn unsubscribe(&mut self) {
        self.listener = None;
        self.gone_already = false;
    }
}

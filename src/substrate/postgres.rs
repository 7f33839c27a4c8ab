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

use std::io;
use std::time::Duration;

use postgres::{Client, NoTls};

use super::lease::{Renewal, Seen, Substrate};
use super::lockfile::{Lease, ReadError};

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

const RELEASE: &str =
    "UPDATE leasequake_leases SET expires_at = '-infinity' WHERE name = $1 AND holder = $2 AND token = $3";

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
    address: String,
    client: Option<Client>,
    key: String,
    ttl_ms: f64,
    advisory: bool,
    /// Our grant (pid, token) while we hold the lease.
    mine: Option<(i64, i64)>,
}

impl PgLease {
    pub fn connect(address: &str, key: &str, ttl: Duration, advisory: bool) -> io::Result<PgLease> {
        Ok(PgLease {
            address: address.to_string(),
            client: None,
            key: key.to_string(),
            ttl_ms: ttl.as_secs_f64() * 1000.0,
            advisory,
            mine: None,
        })
    }

    /// The connection, opened lazily and again after an error.
    fn client(&mut self) -> io::Result<&mut Client> {
        if self.client.is_none() {
            let timeout = Duration::from_secs_f64((self.ttl_ms / 3000.0).max(0.05));
            let mut config: postgres::Config = self.address.parse().map_err(err)?;
            config.connect_timeout(timeout);
            let mut client = config.connect(NoTls).map_err(err)?;
            let ms = timeout.as_millis().max(1);
            client.batch_execute(&format!("SET statement_timeout = {ms}")).map_err(err)?;
            self.client = Some(client);
        }
        Ok(self.client.as_mut().expect("connected above"))
    }

    /// Run `f` on the connection; forget the connection after an error.
    fn with<T>(&mut self, f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>) -> io::Result<T> {
        let result = f(self.client()?).map_err(err);
        if result.is_err() {
            self.client = None;
        }
        result
    }
}

impl Substrate for PgLease {
    fn acquire(&mut self, fresh: Lease, _seen_token: u64) -> io::Result<Option<Lease>> {
        let (key, pid, ttl) = (self.key.clone(), fresh.process_id, self.ttl_ms);
        if self.advisory {
            let id = self.key.clone();
            let locked: bool =
                self.with(|c| c.query_one("SELECT pg_try_advisory_lock(hashtext($1))", &[&id]).map(|r| r.get(0)))?;
            if !locked {
                return Ok(None);
            }
            // Ours: count the generation (the row's expiry is not used).
            let row = self.with(|c| c.query_one(GRANT, &[&key, &pid, &ttl, &true]))?;
            let token: i64 = row.get(0);
            self.mine = Some((pid, token));
            return Ok(Some(Lease { token: Some(token as u64), ..fresh }));
        }
        let row = self.with(|c| c.query_opt(GRANT, &[&key, &pid, &ttl, &false]))?;
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
                .with(|c| {
                    let got: bool = c.query_one("SELECT pg_try_advisory_lock(hashtext($1))", &[&id])?.get(0);
                    if got {
                        c.execute("SELECT pg_advisory_unlock(hashtext($1))", &[&id])?;
                    }
                    Ok(got)
                })
                .map_err(ReadError::Io)?;
            if free {
                return Ok(Seen::Free);
            }
        }
        let key = self.key.clone();
        let row = self.with(|c| c.query_opt(OBSERVE, &[&key])).map_err(ReadError::Io)?;
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
                .with(|c| {
                    // This session takes no other advisory lock.
                    c.query_one(
                        "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
                        &[],
                    )
                    .map(|r| r.get(0))
                })
                .map_err(ReadError::Io)?;
            if held {
                return Ok(Renewal::Renewed(Lease { token: Some(token as u64), ..fresh }));
            }
            self.mine = None;
            return Ok(Renewal::Lost { holder: None });
        }
        let ttl = self.ttl_ms;
        let row = self.with(|c| c.query_opt(RENEW, &[&key, &pid, &token, &ttl])).map_err(ReadError::Io)?;
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
            self.with(|c| c.execute("SELECT pg_advisory_unlock(hashtext($1))", &[&id]).map(|_| ()))?;
            return Ok(());
        }
        self.with(|c| c.execute(RELEASE, &[&key, &pid, &token]).map(|_| ()))
    }
}

#!/usr/bin/env python3
"""PostgreSQL advisory locks through psycopg as leader election
(examples/clients/election.py).

--form session:      pg_try_advisory_lock(k) on an autocommit connection:
                     held until unlocked or the session ends. The leader
                     checks pg_locks at each renew tick (taking the lock
                     again would stack it, not check it).
--form transaction:  pg_try_advisory_xact_lock(k) inside a transaction the
                     leader never ends; a SELECT in it at each renew tick
                     checks the connection. Released by the rollback.
k is the lease's name hashed to a bigint on the server (hashtextextended).
No expiry either way: a paused holder keeps it; a dead one's session ends.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import election  # noqa: E402
import psycopg  # noqa: E402

KEY = "hashtextextended(%s, 0)"


class Advisory:
    def __init__(self, address, name, form, lease_ms):
        self.address, self.name, self.form = address, name, form
        self.timeout = max(1, round(lease_ms / 3000))
        self.conn = None

    def connect(self):
        if self.conn is None or self.conn.closed:
            autocommit = self.form == "session"
            self.conn = psycopg.connect(self.address, autocommit=autocommit, connect_timeout=self.timeout)
        return self.conn

    def try_acquire(self):
        conn = self.connect()
        call = "pg_try_advisory_lock" if self.form == "session" else "pg_try_advisory_xact_lock"
        (got,) = conn.execute(f"SELECT {call}({KEY})", (self.name,)).fetchone()
        if not got and self.form == "transaction":
            conn.rollback()
        return {"holder": conn.info.backend_pid} if got else None

    def hold(self):
        if self.form == "transaction":
            self.conn.execute("SELECT 1")
            return True
        query = (
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid() "
            f"AND ((classid::bigint << 32) | objid::bigint) = {KEY}"
        )
        (held,) = self.conn.execute(query, (self.name,)).fetchone()
        return held > 0

    def release(self):
        if self.form == "session":
            self.conn.execute(f"SELECT pg_advisory_unlock({KEY})", (self.name,))
        else:
            self.conn.rollback()


if __name__ == "__main__":
    election.main(
        __doc__,
        lambda a: Advisory(a.address, a.lock, a.form, a.lease_ms),
        lambda p: p.add_argument("--form", choices=["session", "transaction"], default="session"),
    )

#!/usr/bin/env python3
"""python-redis-lock as leader election (examples/clients/election.py).

redis_lock.Lock(conn, name, expire=lease, auto_renewal=True): SET NX EX in
whole seconds (expire is cut to an int: a lease under 1 s cannot be
asked for), renewed by the library's own thread every 2/3 of expire. The
leader checks at each renew tick that the key still names it
(get_owner_id): the library tells nobody when a renewal failed.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import election  # noqa: E402
import redis  # noqa: E402
import redis_lock  # noqa: E402


class Lease:
    def __init__(self, address, name, lease_ms):
        timeout = lease_ms / 3000
        self.client = redis.Redis.from_url(address, socket_timeout=timeout, socket_connect_timeout=timeout)
        self.name, self.expire = name, int(lease_ms / 1000)
        self.lock = None

    def try_acquire(self):
        lock = redis_lock.Lock(self.client, self.name, expire=self.expire, auto_renewal=True)
        if not lock.acquire(blocking=False):
            return None
        self.lock = lock
        # Its renewals are the library's thread's, unseen: no expiry to
        # report that later ticks would keep true.
        return {}

    def hold(self):
        owner = self.lock.get_owner_id()
        if isinstance(owner, bytes):
            owner = owner.decode()
        return owner == self.lock.id

    def release(self):
        self.lock.release()


if __name__ == "__main__":
    election.main(__doc__, lambda a: Lease(a.address, a.lock, a.lease_ms))

#!/usr/bin/env python3
"""redis-py's Lock as leader election (examples/clients/election.py).

r.lock(name, timeout=lease): SET NX PX on the server, a random token as
its value; the leader calls reacquire() every renew interval, which sets
the TTL back to the full lease only while the token is still ours, and
raises LockNotOwnedError once it is not. No fencing token.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import election  # noqa: E402
import redis  # noqa: E402


class Lease:
    def __init__(self, address, name, lease_ms):
        # A request that hangs past a third of the lease has failed.
        timeout = lease_ms / 3000
        client = redis.Redis.from_url(address, socket_timeout=timeout, socket_connect_timeout=timeout)
        self.lock = client.lock(name, timeout=lease_ms / 1000, blocking=False, thread_local=False)
        self.lease_ms = lease_ms

    def try_acquire(self):
        return {"expires_in_ms": self.lease_ms} if self.lock.acquire(blocking=False) else None

    def hold(self):
        self.lock.reacquire()
        return {"expires_in_ms": self.lease_ms}

    def release(self):
        self.lock.release()


if __name__ == "__main__":
    election.main(__doc__, lambda a: Lease(a.address, a.lock, a.lease_ms))

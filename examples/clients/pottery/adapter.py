#!/usr/bin/env python3
"""pottery's Redlock as leader election (examples/clients/election.py).

Redlock(key, masters, auto_release_time=lease): SET NX PX on each of the
servers ({members}, or the one {address}), held where a majority granted
it within its validity. The leader calls extend() every renew interval,
which sets every server's TTL back to the full lease where a majority
still holds its value; num_extensions is raised from its default of 3,
past which extend() refuses. No fencing token.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import election  # noqa: E402
import pottery  # noqa: E402
import redis  # noqa: E402


class Lease:
    def __init__(self, addresses, name, lease_ms):
        timeout = lease_ms / 3000
        masters = {redis.Redis.from_url(a, socket_timeout=timeout, socket_connect_timeout=timeout) for a in addresses}
        self.lock = pottery.Redlock(
            key=name, masters=masters, auto_release_time=lease_ms / 1000, num_extensions=sys.maxsize
        )
        self.lease_ms = lease_ms

    def try_acquire(self):
        return {"expires_in_ms": self.lease_ms} if self.lock.acquire(blocking=False) else None

    def hold(self):
        self.lock.extend()
        return {"expires_in_ms": self.lease_ms}

    def release(self):
        self.lock.release()


if __name__ == "__main__":
    election.main(__doc__, lambda a: Lease([m for m in a.members.split(",") if m] or [a.address], a.lock, a.lease_ms))

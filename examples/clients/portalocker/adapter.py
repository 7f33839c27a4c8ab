#!/usr/bin/env python3
"""portalocker as leader election (examples/clients/election.py).

--kind file:   portalocker.Lock, flock(2) on the lock file, held while the
               process lives. One attempt (fail_when_locked, timeout 0):
               acquire() with no arguments would poll for 5 s.
--kind redis:  portalocker.RedisLock, a subscription to a channel named
               after the lease: held while the holder's connection is
               subscribed and answers a contender's ping within 1 s
               (a constant: it does not scale).
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import election  # noqa: E402
import portalocker  # noqa: E402


class Held:
    def __init__(self, make):
        self.make, self.lock = make, None

    def try_acquire(self):
        lock = self.make()
        try:
            lock.acquire(timeout=0, fail_when_locked=True)
        except portalocker.exceptions.LockException:
            return None
        self.lock = lock
        return {"holder": os.getpid()}

    def hold(self):
        return True  # the kernel, or the subscription, keeps it while we live

    def release(self):
        self.lock.release()


def make(args):
    if args.kind == "file":
        return Held(lambda: portalocker.Lock(args.lock, timeout=0, fail_when_locked=True))
    import redis

    def redis_lock():
        connection = redis.Redis.from_url(args.address)
        return portalocker.RedisLock(args.lock, connection=connection, timeout=0, fail_when_locked=True)

    return Held(redis_lock)


if __name__ == "__main__":
    election.main(__doc__, make, lambda p: p.add_argument("--kind", choices=["file", "redis"], default="file"))

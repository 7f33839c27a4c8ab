#!/usr/bin/env python3
"""fasteners as leader election (examples/clients/election.py).

InterProcessLock: a POSIX record lock (lockf) on the lock file, held while
the process lives; nothing to renew.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import election  # noqa: E402
import fasteners  # noqa: E402


class Held:
    def __init__(self, path):
        self.lock = fasteners.InterProcessLock(path)

    def try_acquire(self):
        return {"holder": os.getpid()} if self.lock.acquire(blocking=False) else None

    def hold(self):
        return True  # the kernel keeps it while we live

    def release(self):
        self.lock.release()


if __name__ == "__main__":
    election.main(__doc__, lambda a: Held(a.lock))

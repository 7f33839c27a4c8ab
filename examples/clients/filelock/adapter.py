#!/usr/bin/env python3
"""filelock as leader election (examples/clients/election.py).

--kind file:   FileLock, flock(2) on the lock file, held while the process
               lives; nothing to renew.
--kind soft:   SoftFileLock, a marker created with O_EXCL, broken by a
               contender only once the pid in it is gone.
--kind lease:  SoftFileLease (filelock >= 3.30), a marker whose mtime a
               heartbeat thread refreshes every renew interval; a contender
               takes it after lease_duration without a refresh. Its
               on_compromise callback is how the holder learns it lost it.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import election  # noqa: E402
import filelock  # noqa: E402


class Held:
    def __init__(self, lock):
        self.lock = lock

    def try_acquire(self):
        try:
            self.lock.acquire(blocking=False)
        except filelock.Timeout:
            return None
        return {"holder": os.getpid()}

    def hold(self):
        return True  # the kernel, or the marker, keeps it while we live

    def release(self):
        self.lock.release()


class Lease(Held):
    def __init__(self, path, lease_s, heartbeat_s):
        self.compromise = None
        super().__init__(
            filelock.SoftFileLease(
                path,
                lease_duration=lease_s,
                heartbeat_interval=heartbeat_s,
                on_compromise=self.compromised,
                thread_local=False,
            )
        )

    def compromised(self, why):
        self.compromise = why  # told from the heartbeat thread

    def try_acquire(self):
        # Its heartbeats are the library's thread's, unseen: no expiry to
        # report that later ticks would keep true.
        self.compromise = None
        return super().try_acquire()

    def hold(self):
        if self.compromise is not None:
            raise RuntimeError(f"compromised: {self.compromise}")
        return True


def make(args):
    if args.kind == "lease":
        return Lease(args.lock, args.lease_ms / 1000, args.renew_ms / 1000)
    return Held((filelock.FileLock if args.kind == "file" else filelock.SoftFileLock)(args.lock))


if __name__ == "__main__":
    election.main(__doc__, make, lambda p: p.add_argument("--kind", choices=["file", "soft", "lease"], default="file"))

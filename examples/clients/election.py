"""Leader election over a lock library, spoken to leasequake.

Each Python adapter in examples/clients/<library>/ wraps one library's lock
in three calls and hands it to `run`, which is the same for all of them
(docs/clients.md):

* `try_acquire()`: one attempt that does not wait; a dict of event detail
  (`token`, `lease_until`, `expires_in_ms`) when it got the lock, else None.
* `hold()`: at each of the leader's ticks (every renew interval), keep the
  lock as the library says to and say whether it is still ours: a dict of
  detail (a renewal: said as `renewed`), True (held, nothing done: the
  library keeps it by itself, or nothing needs keeping), or False (lost).
* `release()`: give it back (on SIGTERM, as leader).

Whoever holds the lock leads; the others try again every watch interval.
The leader's work is a write to the protected resource (`--resource`, the
built-in worker's store: a directory holding the report): once it has the
lock, and at each of its ticks before it keeps the lock, so that a leader
resumed from a pause writes before it learns it lost the lock, as the
built-in worker does. A write carries the library's fencing token where it
gives one, and the store then refuses a token lower than the highest it has
seen; without a token nothing can be refused (the checker still finds the
stale writes: docs/metrics.md).
Events go to file descriptor 3 as JSON lines (docs/worker-protocol.md),
stamped with CLOCK_MONOTONIC, which the harness shares. The ticks keep a
fixed grid (missed ones are dropped), as the built-in worker's do.
"""

import argparse
import fcntl
import json
import os
import signal
import sys
import time


class Events:
    def __init__(self):
        self.out = os.fdopen(int(os.environ.get("LEASEQUAKE_EVENTS_FD", "3")), "w")

    def emit(self, event, t_ns=None, **detail):
        line = {"t_ns": t_ns or time.monotonic_ns(), "event": event}
        detail = {k: v for k, v in detail.items() if v is not None}
        if detail:
            line["detail"] = detail
        try:
            self.out.write(json.dumps(line) + "\n")
            self.out.flush()
        except BrokenPipeError:
            sys.exit(1)


def write(resource, token):
    """The leader's work: the report, under the store's own lock. False if
    the store refused `token` (a higher one was seen)."""
    os.makedirs(resource, exist_ok=True)
    with open(os.path.join(resource, ".guard"), "a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if token is not None:
            try:
                with open(os.path.join(resource, "highest")) as f:
                    highest = int(f.read().strip() or 0)
            except FileNotFoundError:
                highest = 0
            if token < highest:
                return False
            with open(os.path.join(resource, "highest"), "w") as f:
                f.write(str(token))
        with open(os.path.join(resource, "report"), "w") as f:
            json.dump({"processId": os.getpid(), "token": token}, f)
    return True


def arguments(description, extra=None):
    """The settings every adapter takes, scaled by the harness, and its own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--lock", required=True, help="the lock file ({lock}) or the lease's name on a server ({key})")
    p.add_argument("--address", default="", help="the server ({address})")
    p.add_argument("--members", default="", help="a replicated service's members ({members}), comma-separated")
    p.add_argument("--resource", default="", help="the protected resource, a directory ({resource})")
    p.add_argument("--lease-ms", type=float, required=True)
    p.add_argument("--renew-ms", type=float, required=True)
    p.add_argument("--watch-ms", type=float, required=True)
    if extra:
        extra(p)
    return p.parse_args()


def main(description, make, extra=None):
    """An adapter's whole program: its arguments, its lock (`make(args)`),
    the election."""
    args = arguments(description, extra)
    run(make(args), args.renew_ms, args.watch_ms, args.resource)


def run(lock, renew_ms, watch_ms, resource=""):
    """Elect with `lock` until SIGTERM, writing to `resource` (if any) as
    leader; exit 0."""
    events = Events()
    token = None

    def work():
        if not resource:
            return
        try:
            kind, error = ("write_accepted" if write(resource, token) else "write_rejected"), None
        except Exception as e:  # the store unwritable or unreadable: no write
            kind, error = "write_rejected", f"{type(e).__name__}: {e}"
        events.emit(kind, token=token, error=error)

    # SIGTERM is only ever taken by sigtimedwait, which is also how the
    # loop sleeps: a shutdown is handled the moment it comes, never inside
    # a library call.
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT])
    events.emit("ready")
    if not sys.stdin.isatty():
        sys.stdin.buffer.read()  # the release: EOF once every worker is ready
    leading = False
    next_tick = time.monotonic()
    while True:
        got = signal.sigtimedwait([signal.SIGTERM, signal.SIGINT], max(0.0, next_tick - time.monotonic()))
        # CPython 3.11 returns a garbage siginfo (si_signo 0) instead of None
        # when a SIGSTOP/SIGCONT interrupts the wait past its timeout.
        if got is not None and got.si_signo in (signal.SIGTERM, signal.SIGINT):
            break
        was = leading
        if leading:
            work()  # before the renewal, and not timed with it
        began = time.monotonic_ns()
        op_us = lambda: (time.monotonic_ns() - began) // 1000
        if leading:
            try:
                kept, error = lock.hold(), None
            except Exception as e:  # the library's own way of saying it lost the lock
                kept, error = False, f"{type(e).__name__}: {e}"
            if isinstance(kept, dict):
                events.emit("renewed", op_us=op_us(), **kept)
            elif not kept:
                events.emit("renew_failed", op_us=op_us(), error=error or "the lock is no longer ours")
                leading = False
                events.emit("stepped_down", reason="lost")
        else:
            try:
                got_it, error = lock.try_acquire(), None
            except Exception as e:
                got_it, error = None, f"{type(e).__name__}: {e}"
            if got_it is not None:
                leading, token = True, got_it.get("token")
                events.emit("acquired", op_us=op_us(), **got_it)
                work()
            else:
                events.emit("not_acquired", op_us=op_us(), error=error)
        now = time.monotonic()
        interval = (renew_ms if leading else watch_ms) / 1000
        if was != leading:
            next_tick = now + interval
        else:
            next_tick += interval
            while next_tick <= now:  # ticks missed while stopped are dropped
                next_tick += interval
    if leading:
        # Leadership ends when the release begins: a watcher may take the
        # lock before the call returns.
        began, error = time.monotonic_ns(), None
        try:
            lock.release()
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
        events.emit("released", t_ns=began, error=error)
    events.emit("exiting", code=0)
    sys.exit(0)

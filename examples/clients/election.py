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
Events go to file descriptor 3 as JSON lines (docs/worker-protocol.md),
stamped with CLOCK_MONOTONIC, which the harness shares. The ticks keep a
fixed grid (missed ones are dropped), as the built-in worker's do.
"""

import argparse
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


def arguments(description, extra=None):
    """The settings every adapter takes, scaled by the harness, and its own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--lock", required=True, help="the lock file ({lock}) or the lease's name on a server ({key})")
    p.add_argument("--address", default="", help="the server ({address})")
    p.add_argument("--members", default="", help="a replicated service's members ({members}), comma-separated")
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
    run(make(args), args.renew_ms, args.watch_ms)


def run(lock, renew_ms, watch_ms):
    """Elect with `lock` until SIGTERM; exit 0."""
    events = Events()
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
                leading = True
                events.emit("acquired", op_us=op_us(), **got_it)
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

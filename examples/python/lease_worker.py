#!/usr/bin/env python3
"""A lock-file lease worker written independently of leasequake, in Python.

It speaks leasequake's event protocol (docs/worker-protocol.md): one JSON
object per line on file descriptor 3 ($LEASEQUAKE_EVENTS_FD), stamped with
CLOCK_MONOTONIC (time.monotonic_ns() on Linux), which the harness shares.

The algorithm is the blog's, with atomic acquisition: the lease file is
written to a temporary file and link(2)ed into place, so it is never empty;
`leaseUntil` is exact (fractional seconds); a takeover removes the expired
file and links a new one.

--step-down-late-ms N makes it deliberately broken: when a renewal finds
another holder, it keeps believing for N ms before stepping down. The
double-leader time that follows has a known ground truth: N ms.
"""

import argparse
import json
import os
import signal
import sys
import time

EVENTS = None


def emit(event, t_ns=None, **detail):
    line = {"t_ns": t_ns or time.monotonic_ns(), "event": event}
    if detail:
        line["detail"] = detail
    try:
        EVENTS.write(json.dumps(line) + "\n")
        EVENTS.flush()
    except BrokenPipeError:
        sys.exit(1)


def read_lease(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (ValueError, OSError):
        return "unreadable"


def try_create(path, lease):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(lease, f)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def rewrite(path, lease):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(lease, f)
    os.replace(tmp, path)


def main():
    global EVENTS
    p = argparse.ArgumentParser()
    p.add_argument("--lock", required=True)
    p.add_argument("--lease-ms", type=float, default=9000)
    p.add_argument("--renew-ms", type=float, default=3000)
    p.add_argument("--watch-ms", type=float, default=3000)
    p.add_argument("--step-down-late-ms", type=float, default=0)
    args = p.parse_args()
    EVENTS = os.fdopen(int(os.environ.get("LEASEQUAKE_EVENTS_FD", "3")), "w")
    pid = os.getpid()
    lease_s = args.lease_ms / 1000

    # SIGTERM is blocked and only ever received by sigtimedwait, which is
    # also how the worker sleeps: a shutdown is handled the moment it comes.
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT])

    def fresh():
        return {"processId": pid, "leaseUntil": time.time() + lease_s}

    # What a lease write reports: its leaseUntil and length let leasequake
    # place its expiry, and so predict each takeover.
    def wrote(lease):
        return {"holder": pid, "lease_until": lease["leaseUntil"], "expires_in_ms": args.lease_ms}

    # Start-up (the interpreter, imports) is done: say so, and wait for the
    # release, which is EOF on stdin. With `ready: true` in the experiment
    # the harness waits for every worker's `ready` before it releases them
    # all together; without it, EOF is already there or comes at once.
    emit("ready")
    if not sys.stdin.isatty():
        sys.stdin.buffer.read()

    lease = fresh()
    leading = try_create(args.lock, lease)
    emit("acquired", how="start", **wrote(lease)) if leading else emit("not_acquired")
    interval = lambda: (args.renew_ms if leading else args.watch_ms) / 1000
    next_tick = time.monotonic() + interval()
    while True:
        got = signal.sigtimedwait([signal.SIGTERM, signal.SIGINT], max(0.0, next_tick - time.monotonic()))
        # CPython 3.11 returns a garbage siginfo (si_signo 0) instead of None
        # when a SIGSTOP/SIGCONT interrupts the wait past its timeout.
        if got is not None and got.si_signo in (signal.SIGTERM, signal.SIGINT):
            break
        was = leading
        current = read_lease(args.lock)
        if leading:
            if isinstance(current, dict) and current.get("processId") == pid:
                lease = fresh()
                rewrite(args.lock, lease)
                emit("renewed", **wrote(lease))
            else:
                holder = current.get("processId") if isinstance(current, dict) else None
                # Said when the renewal finds the other holder: the step-down
                # comes now, or --step-down-late-ms later.
                emit("renew_failed", error=f"the lease is held by {holder}")
                if args.step_down_late_ms:
                    time.sleep(args.step_down_late_ms / 1000)  # the bug
                leading = False
                emit("stepped_down", reason="other-holder", **({"holder": holder} if holder else {}))
        elif current is None:
            lease = fresh()
            leading = try_create(args.lock, lease)
            emit("acquired", how="retry", **wrote(lease)) if leading else emit("not_acquired")
        elif current == "unreadable":
            emit("unreadable", error="cannot parse the lease")
        elif current["leaseUntil"] < time.time():
            emit("expired_seen", holder=current["processId"])
            try:
                os.unlink(args.lock)
            except FileNotFoundError:
                pass
            lease = fresh()
            leading = try_create(args.lock, lease)
            emit("acquired", how="takeover", **wrote(lease)) if leading else emit("takeover_lost")
        else:
            emit("held_by", holder=current["processId"], lease_until=current["leaseUntil"])
        now = time.monotonic()
        if was != leading:
            next_tick = now + interval()
        else:
            next_tick += interval()
            while next_tick <= now:  # ticks missed while stopped are dropped
                next_tick += interval()
    if leading:
        # Leadership ends when the release begins (stamped here), not when
        # the file is gone: a watcher may take it over in between.
        began = time.monotonic_ns()
        current = read_lease(args.lock)
        if isinstance(current, dict) and current.get("processId") == pid:
            os.unlink(args.lock)
        emit("released", t_ns=began)
    emit("exiting", code=0)


if __name__ == "__main__":
    main()

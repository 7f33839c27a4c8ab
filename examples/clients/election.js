// Leader election over a lock library, spoken to leasequake: the Node side
// of election.py, the same loop (docs/clients.md). An adapter hands `run`
// an object with three async calls:
//   tryAcquire()  one attempt that does not wait: event detail, or null
//   hold()        at each renew tick: detail (a renewal), true (held,
//                 nothing done), or false (lost); a throw is a loss
//   release()     on SIGTERM, as leader
// Events are JSON lines on fd 3, stamped with process.hrtime (libuv's
// CLOCK_MONOTONIC, which the harness shares); the ticks keep a fixed grid.
// The leader writes to the protected resource (--resource) as election.py's
// leader does: once it has the lock, and at each tick before it keeps it.
"use strict";
const fs = require("fs");
const path = require("path");

const fd = Number(process.env.LEASEQUAKE_EVENTS_FD || 3);
const now = () => process.hrtime.bigint();

function emit(event, detail, tNs) {
  const line = { t_ns: Number(tNs ?? now()), event };
  const kept = Object.fromEntries(Object.entries(detail || {}).filter(([, v]) => v !== undefined && v !== null));
  if (Object.keys(kept).length) line.detail = kept;
  fs.writeSync(fd, JSON.stringify(line) + "\n");
}

function args(extra = []) {
  const out = { lock: "", address: "", members: "", resource: "" };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, "").replace(/-(.)/g, (_, c) => c.toUpperCase());
    if (!(key in out) && !["leaseMs", "renewMs", "watchMs", ...extra].includes(key)) {
      throw new Error(`unknown option ${argv[i]}`);
    }
    out[key] = argv[i + 1];
  }
  for (const k of ["leaseMs", "renewMs", "watchMs"]) out[k] = Number(out[k]);
  return out;
}

// The leader's work: the report in the store. Node has no flock, which a
// store that checks fencing tokens needs (election.py's `write`), and
// neither Node library here gives a token: a write with one is refused.
function write(resource, token) {
  if (token !== undefined && token !== null) {
    throw new Error("a store that checks fencing tokens needs flock(2), which Node lacks");
  }
  fs.mkdirSync(resource, { recursive: true });
  fs.writeFileSync(path.join(resource, "report"), JSON.stringify({ processId: process.pid, token: null }));
}

const sleepUntil = (tNs) => new Promise((r) => setTimeout(r, Math.max(0, Number(tNs - now()) / 1e6)));
const describe = (e) => `${e && e.name ? e.name : "Error"}: ${e && e.message ? e.message : e}`;

async function run(lock, renewMs, watchMs, resource = "") {
  let token = null;
  const work = () => {
    if (!resource) return;
    try {
      write(resource, token);
      emit("write_accepted", {});
    } catch (e) {
      emit("write_rejected", { error: describe(e) });
    }
  };
  let stop = false;
  let wake = null;
  const onSignal = () => {
    stop = true;
    if (wake) wake();
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  emit("ready");
  if (!process.stdin.isTTY) {
    await new Promise((r) => process.stdin.on("end", r).on("error", r).resume());
  }
  let leading = false;
  let next = now();
  while (!stop) {
    await Promise.race([sleepUntil(next), new Promise((r) => (wake = r))]);
    if (stop) break;
    const was = leading;
    if (leading) work(); // before the renewal, and not timed with it
    const began = now();
    const opUs = () => Number((now() - began) / 1000n);
    if (leading) {
      let kept;
      let error;
      try {
        kept = await lock.hold();
      } catch (e) {
        kept = false;
        error = describe(e);
      }
      if (kept && typeof kept === "object") {
        emit("renewed", { op_us: opUs(), ...kept });
      } else if (!kept) {
        emit("renew_failed", { op_us: opUs(), error: error || "the lock is no longer ours" });
        leading = false;
        emit("stepped_down", { reason: "lost" });
      }
    } else {
      let got = null;
      let error;
      try {
        got = await lock.tryAcquire();
      } catch (e) {
        error = describe(e);
      }
      if (got) {
        leading = true;
        token = got.token ?? null;
        emit("acquired", { op_us: opUs(), ...got });
        work();
      } else {
        emit("not_acquired", { op_us: opUs(), error });
      }
    }
    const t = now();
    const interval = BigInt(Math.round((leading ? renewMs : watchMs) * 1e6));
    if (was !== leading) {
      next = t + interval;
    } else {
      next += interval;
      while (next <= t) next += interval; // ticks missed while stopped are dropped
    }
  }
  if (leading) {
    const began = now();
    let error;
    try {
      await lock.release();
    } catch (e) {
      error = describe(e);
    }
    emit("released", { error }, began);
  }
  emit("exiting", { code: 0 });
  process.exit(0);
}

module.exports = { args, emit, run };

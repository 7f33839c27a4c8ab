// proper-lockfile as leader election (examples/clients/election.js).
//
// lock(file, {lockfilePath, stale: lease, update: renew, retries: 0}): a
// directory made with mkdir, here at the harness's lock path (where its
// lock-file faults act), of a file beside it; its mtime refreshed by the library's own
// timer every `update` ms; a contender takes it once the mtime is `stale`
// ms older than its own Date.now() (the wall clock, both sides). The
// library clamps stale to at least 2000 ms and update to [1000, stale/2]:
// constants that do not scale. onCompromised, called when a refresh finds
// the directory gone or not ours, is how the holder learns it lost it
// (its default throws inside a timer, ending the process).
"use strict";
const fs = require("fs");
const path = require("path");
const lockfile = require("proper-lockfile");
const election = require(path.join(__dirname, "..", "election.js"));

const a = election.args();
// The file the directory locks: realpath (the default) needs it to exist.
const target = path.join(path.dirname(a.lock), "proper-lockfile.target");
fs.closeSync(fs.openSync(target, "a"));
let release = null;
let compromised = null;

election.run(
  {
    async tryAcquire() {
      compromised = null;
      try {
        release = await lockfile.lock(target, {
          lockfilePath: a.lock,
          stale: a.leaseMs,
          update: a.renewMs,
          retries: 0,
          onCompromised: (err) => (compromised = err),
        });
      } catch (e) {
        if (e.code === "ELOCKED") return null;
        throw e;
      }
      // Its refreshes are the library's timer's, unseen: no expiry to
      // report that later ticks would keep true.
      return { holder: process.pid };
    },
    async hold() {
      if (compromised) throw compromised;
      return true; // the library's timer keeps it
    },
    async release() {
      await release();
    },
  },
  a.renewMs,
  a.watchMs,
  a.resource,
);

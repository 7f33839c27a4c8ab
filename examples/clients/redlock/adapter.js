// node-redlock (4.x, npm's latest) as leader election (examples/clients/election.js).
//
// redlock.lock(resource, ttl) with retryCount 0: SET NX PX on each server
// ({members}, or the one {address}), held where a majority granted it
// within its validity (ttl less the elapsed time and a drift of 1 % + 2 ms,
// reckoned on Date.now(), the wall clock). The leader calls extend(ttl)
// every renew interval, which refuses once its own validity has run out.
// No fencing token.
"use strict";
const path = require("path");
const Redis = require("ioredis");
const Redlock = require("redlock");
const election = require(path.join(__dirname, "..", "election.js"));

const a = election.args();
const addresses = a.members ? a.members.split(",").filter(Boolean) : [a.address];
const timeout = Math.max(1, Math.round(a.leaseMs / 3));
const clients = addresses.map(
  (url) => new Redis(url, { connectTimeout: timeout, commandTimeout: timeout, maxRetriesPerRequest: 0 }),
);
const redlock = new Redlock(clients, { retryCount: 0 });
redlock.on("clientError", () => {}); // each server's refusal is also the lock call's answer
const ttl = Math.round(a.leaseMs);
let lock = null;

election.run(
  {
    async tryAcquire() {
      try {
        lock = await redlock.lock(a.lock, ttl);
      } catch (e) {
        if (e instanceof Redlock.LockError) return null;
        throw e;
      }
      return { expires_in_ms: ttl };
    },
    async hold() {
      lock = await lock.extend(ttl);
      return { expires_in_ms: ttl };
    },
    async release() {
      await lock.unlock();
    },
  },
  a.renewMs,
  a.watchMs,
  a.resource,
);

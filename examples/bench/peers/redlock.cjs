// One contender of the benchmark's peer rounds on node-redlock 5, used as its README shows:
// `redlock.using()` holds the lock, extends it automatically, and aborts the routine's signal
// when an extension fails; an acquire that gave up is called again. The routine works (appends a line to the shared resource every
// millisecond) until SIGTERM or the abort, then returns, and `using` releases the lock.
//
//     node redlock.cjs URL NAME TTL_MS IDENTITY RESOURCE
//
// The same line protocol as python_lock.py: `waiting`, `acquired`, `lost`, `released`, each
// with the wall clock in nanoseconds, on stdout; each write is `IDENTITY WALL_CLOCK_NS`.

"use strict";

const fs = require("fs");
const Redis = require("ioredis");
const { default: Redlock, ExecutionError } = require("redlock");

// The wall clock at nanosecond grain: Date.now() has only milliseconds, so the monotonic
// high-resolution clock is offset to the wall clock once.
const offset =
  BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6)) -
  process.hrtime.bigint();
const now = () => (process.hrtime.bigint() + offset).toString();
const say = (event) => process.stdout.write(`${event} ${now()}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const [url, name, ttlMs, identity, resource] = process.argv.slice(2);
  const client = new Redis(url);
  const ttl = Number(ttlMs);
  // A lock's validity counts from the first try of its `acquire`, not from the try that won:
  // an acquire that retried for longer than the TTL returns a lock already expired, whose
  // first automatic extension fails at once. So each acquire retries (at the default delay
  // and jitter, 200 ± 100 ms) for half the TTL at most, and the loop calls it again.
  const retryCount = Math.max(1, Math.floor(ttl / 2 / 300));
  const redlock = new Redlock([client], { retryCount });
  let stopping = false;
  process.on("SIGTERM", () => {
    stopping = true;
  });

  say("waiting");
  let entered = false;
  let lost = false;
  for (;;) {
    try {
      await redlock.using([name], ttl, async (signal) => {
        entered = true;
        say("acquired");
        const fd = fs.openSync(resource, "a");
        while (!stopping && !signal.aborted) {
          fs.writeSync(fd, `${identity} ${now()}\n`);
          await sleep(1);
        }
        lost = signal.aborted;
        say(lost ? "lost" : "released");
      });
      break;
    } catch (err) {
      // Held elsewhere for the whole retry window: try again.
      if (!entered && err instanceof ExecutionError) continue;
      // The release of a lock that was lost fails; the work has stopped already.
      if (lost) break;
      throw err;
    }
  }
  if (lost) {
    // Stay, as a process whose work stopped would, until the harness ends it.
    setInterval(() => {}, 1 << 30);
    return;
  }
  await client.quit();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

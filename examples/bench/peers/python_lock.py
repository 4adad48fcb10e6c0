"""One contender of the benchmark's peer rounds, on a Python lock library used as its users
write it: block until the lock is ours, then work (append a line to the shared resource
every millisecond) until SIGTERM, then release.

    python_lock.py LIBRARY URL NAME TTL_MS IDENTITY RESOURCE

LIBRARY is `redis-py` (redis-py's `Lock`, kept by a watchdog thread that extends it every
third of the TTL and tells the work when an extension fails), `python-redis-lock` (its own
`auto_renewal` thread, which has no way to tell the work that the lock is gone) or `pottery`
(its `Redlock` on one master, kept by the same kind of watchdog as redis-py's).

On stdout, one line per event, `EVENT WALL_CLOCK_NS`: `waiting` (about to block on the lock),
`acquired`, `lost` (the watchdog saw the lock gone; the work stops) and `released` (sent
right before the release). Each write to RESOURCE is one line `IDENTITY WALL_CLOCK_NS`,
appended with O_APPEND so that the file's order is the order the writes arrived in.
"""

import os
import signal
import sys
import threading
import time


def say(event):
    print(f"{event} {time.time_ns()}", flush=True)


class RedisPyLock:
    """redis-py's `Lock`: `SET NX PX`, retried every 0.1 s (its default) while held elsewhere."""

    def __init__(self, url, name, ttl):
        import redis

        self.errors = (redis.exceptions.LockError,)
        # Not thread-local: the watchdog thread extends the token the work's thread took.
        self.lock = redis.Redis.from_url(url).lock(name, timeout=ttl, thread_local=False)
        self.ttl = ttl

    def acquire(self):
        self.lock.acquire(blocking=True)

    def extend(self):
        self.lock.extend(self.ttl, replace_ttl=True)

    def release(self):
        self.lock.release()


class PythonRedisLock:
    """python-redis-lock: `SET NX EX`, then `BLPOP` on its signal list until a release pushes."""

    errors = ()

    def __init__(self, url, name, ttl):
        import redis
        import redis_lock

        # Its expiry is in whole seconds.
        expire = max(1, round(ttl))
        self.lock = redis_lock.Lock(
            redis.Redis.from_url(url), name, expire=expire, auto_renewal=True
        )

    def acquire(self):
        self.lock.acquire(blocking=True)

    extend = None

    def release(self):
        self.lock.release()


class PotteryRedlock:
    """pottery's `Redlock` on one master: tries again after a random delay of up to 0.2 s."""

    def __init__(self, url, name, ttl):
        import redis
        from pottery import Redlock
        from pottery.exceptions import ExtendUnlockedLock, TooManyExtensions

        self.errors = (ExtendUnlockedLock, TooManyExtensions)
        self.lock = Redlock(
            key=name,
            masters={redis.Redis.from_url(url)},
            auto_release_time=ttl,
            num_extensions=sys.maxsize,
        )

    def acquire(self):
        self.lock.acquire()

    def extend(self):
        self.lock.extend()

    def release(self):
        self.lock.release()


LIBRARIES = {
    "redis-py": RedisPyLock,
    "python-redis-lock": PythonRedisLock,
    "pottery": PotteryRedlock,
}


def watchdog(lock, period, lost, stop):
    """Extends the lock every `period` until stopped; sets `lost` when an extension fails."""
    while not stop.wait(period):
        try:
            lock.extend()
        except lock.errors:
            lost.set()
            return


def main():
    library, url, name, ttl_ms, identity, resource = sys.argv[1:7]
    ttl = int(ttl_ms) / 1000
    lock = LIBRARIES[library](url, name, ttl)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    say("waiting")
    lock.acquire()
    say("acquired")
    lost = threading.Event()
    if lock.extend is not None:
        threading.Thread(
            target=watchdog, args=(lock, ttl / 3, lost, stop), daemon=True
        ).start()
    fd = os.open(resource, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    while not stop.is_set() and not lost.is_set():
        os.write(fd, f"{identity} {time.time_ns()}\n".encode())
        stop.wait(0.001)
    if lost.is_set():
        say("lost")
        stop.wait()
        return
    say("released")
    lock.release()


if __name__ == "__main__":
    main()

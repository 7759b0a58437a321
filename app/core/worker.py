"""What runs inside a worker process of a `WorkPool` (app/core/pool.py): the initializer, the
watchdog that stops a job past its deadline, its memory bound or its cancel, the job's cancel
flag, the lender of idle slots, and `run_job`, which runs one job and turns its errors into
values that survive pickling. Every worker imports it: no FastAPI, nothing of the server.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import threading
import time
from collections.abc import Callable

from app.scenarios import ParamError, PipelineError
from app.sim.machine import MoveError

_flags = None
_reports = None
_spare = None
_spare_lock = None


def init_worker(flags, reports, nice: int, parent: int, spare=None, spare_lock=None) -> None:
    """Runs first in each worker. The workers run at a lower priority than the server: on a
    small machine a search takes the idle CPU, not the event loop's. The watchdog starts: it
    ends a job past its deadline, its memory bound or (after `CANCEL_GRACE_S`) its cancel, and
    the worker itself once the server process that started it is gone."""
    global _flags, _reports, _spare, _spare_lock
    _flags, _reports = flags, reports
    _spare, _spare_lock = spare, spare_lock
    if nice:
        with contextlib.suppress(OSError, AttributeError):
            os.nice(nice)
    signal.signal(STOP_SIGNAL, _stop_job)
    watched = os.getppid() if parent < 0 else parent
    threading.Thread(target=_watchdog, args=(watched, threading.main_thread().ident),
                     name="watchdog", daemon=True).start()


WATCH_S = 0.05
"""How often a worker's watchdog looks at its job and at its parent."""
CANCEL_GRACE_S = 1.0
"""A cancelled job that has not stopped by itself (every loop of the checker looks at its flag)
this long after is stopped by its watchdog."""
STOP_SIGNAL = signal.SIGUSR1
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class Stopped(BaseException):  # noqa: N818 - a stop, raised into a job, not an error
    """Raised into a job's thread by its watchdog: `reason` is deadline, memory or cancelled."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _Job:
    """The job a worker runs now, as its watchdog sees it."""

    armed = False
    slot = 0
    deadline = float("inf")
    max_rss = 0
    cancelled_at: float | None = None
    reason: str | None = None


_job = _Job()


def _rss() -> int:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _stop_job(signum, frame) -> None:
    """The signal handler (main thread, between two bytecodes of the job): stop it if it is
    still the job that the watchdog judged."""
    if _job.armed and _job.reason is not None:
        _job.armed = False
        raise Stopped(_job.reason)


def _judge(now: float) -> str | None:
    job = _job
    if now >= job.deadline:
        return "deadline"
    if job.max_rss and _rss() > job.max_rss:
        return "memory"
    if _flags is not None and _flags[job.slot]:
        if job.cancelled_at is None:
            job.cancelled_at = now
        elif now - job.cancelled_at >= CANCEL_GRACE_S:
            return "cancelled"
    return None


def _watchdog(parent: int, main: int) -> None:
    """Exit once the parent is gone (the worker is then a child of another process, so
    `getppid` changes; unlike PR_SET_PDEATHSIG this does not fire when merely the thread that
    started the worker ends); stop the running job when `_judge` says so."""
    while True:
        if os.getppid() != parent:
            os._exit(70)
        if _job.armed and _job.reason is None:
            reason = _judge(time.monotonic())
            if reason is not None:
                _job.reason = reason
                signal.pthread_kill(main, STOP_SIGNAL)
        time.sleep(WATCH_S)


class Flag:
    """A job's cancel flag, as seen from the worker."""

    def __init__(self, slot: int):
        self.slot = slot

    def is_set(self) -> bool:
        return bool(_flags[self.slot])

    def set(self) -> None:
        _flags[self.slot] = 1


class Lender:
    """The pool's idle slots, as a job in a worker sees them: a job may borrow slots no other
    job holds (for helper processes of its own, app/check/parallel.py) and must give them back
    as soon as `owed` says a new job took one. The server publishes how many of its `workers`
    slots no job holds (`spare[0]`); `spare[1]` counts the slots lent now."""

    def __init__(self, spare, lock):
        self.spare = spare
        self.lock = lock

    def borrow(self, want: int) -> int:
        """Up to `want` slots (0 when none is idle)."""
        with self.lock:
            k = max(0, min(want, self.spare[0] - self.spare[1]))
            self.spare[1] += k
        return k

    def give_back(self, k: int) -> None:
        if k > 0:
            with self.lock:
                self.spare[1] = max(0, self.spare[1] - k)

    def owed(self) -> int:
        """Slots lent beyond what is idle now (a job arrived): give that many back."""
        return max(0, self.spare[1] - self.spare[0])


def lender() -> Lender | None:
    """The lender of the pool this worker serves (None outside a pool worker)."""
    if _spare is None or _spare_lock is None:
        return None
    return Lender(_spare, _spare_lock)


def _report(slot: int) -> Callable:
    return lambda payload: _reports.put((slot, payload))


def _release_memory() -> None:
    """After a stopped job: what it built is garbage now; give it back to the system."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def run_job(slot: int, fn: Callable, args: tuple, reporting: bool, cancellable: bool,
          until: float | None = None, max_rss: int = 0, limit_s: float | None = None):
    """Run `fn(*args[, report, cancel])` in the worker, watched until `until` (wall clock) or
    `limit_s` after it starts, whichever comes first, and within `max_rss` bytes of resident
    memory; errors that carry a field come back as values (an exception with extra
    constructor arguments does not survive pickling)."""
    extra = ()
    if cancellable:
        extra = (_report(slot) if reporting else None, Flag(slot))
    _flags[len(_flags) // 2 + slot] = 1  # started: no longer waiting for a worker
    job = _job
    job.slot, job.max_rss, job.reason, job.cancelled_at = slot, max_rss, None, None
    now = time.monotonic()
    job.deadline = min(float("inf") if until is None else now + max(0.0, until - time.time()),
                       float("inf") if limit_s is None else now + limit_s)
    try:
        job.armed = True
        try:
            result = fn(*args, *extra)
        finally:
            job.armed = False  # a signal handled after this line does nothing
        return ("ok", result)
    except Stopped as stop:
        _release_memory()
        return ("stopped", stop.reason)
    except ParamError as err:
        return ("param", err.field, err.message)
    except PipelineError as err:
        return ("pipeline", err.message, err.line, err.column, err.hint, err.limit)
    except MoveError as err:
        return ("move", str(err))

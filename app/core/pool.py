"""Bounded pools of worker processes for CPU-heavy work (schedule checks, long run builds).

A pure-Python search holds the GIL: in a thread it starves the event loop (and every other
client). In a worker process it does not. Each pool runs at most `workers` jobs and queues at most
`queue` more; past that `Busy` (the API answers 503 with Retry-After). Each job has a slot with a
shared cancel flag that the job polls (`Flag.is_set`, the `threading.Event` method the checker
already calls), so a job whose client went away stops within milliseconds, and a shared progress
queue that carries its reports back to the event loop. No FastAPI imports: workers stay light.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from app.scenarios import ParamError, PipelineError
from app.sim.machine import MoveError


class Busy(Exception):
    """Every worker is busy and the queue is full (or a worker cannot be started now)."""

    def __init__(self, what: str, retry_after: int = 5):
        super().__init__(what)
        self.retry_after = retry_after


# ------------------------------------------------------------------------- in the worker

_flags = None
_reports = None
_spare = None
_spare_lock = None


def _init(flags, reports, nice: int, parent: int, spare=None, spare_lock=None) -> None:
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


GRACE_S = 3.0
"""How long shutdown waits for cancelled jobs before it terminates their workers."""
WATCH_S = 0.05
"""How often a worker's watchdog looks at its job and at its parent."""
CANCEL_GRACE_S = 1.0
"""A cancelled job that has not stopped by itself (every loop of the checker looks at its flag)
this long after is stopped by its watchdog."""
STOP_SIGNAL = signal.SIGUSR1
STOP_READER_S = 1.0
"""How long ending a report reader waits for its queue's write lock, then for the thread."""
_SENTINEL = pickle.dumps(None)
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


def _call(slot: int, fn: Callable, args: tuple, reporting: bool, cancellable: bool,
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


# ------------------------------------------------------------------------ in the server

class WorkPool:
    """`await pool.run(fn, *args)`: `fn` in a worker process. A `cancellable` job (or one with
    `progress`, which gets its reports on the event loop) gets `(report, cancel)` as last
    arguments; cancelling the awaiting task raises the job's cancel flag."""

    def __init__(self, name: str, workers: int, queue: int, start_method: str = "spawn",
                 nice: int = 10, timeout_s: float | None = None, max_rss: int = 0):
        self.name = name
        self.timeout_s = timeout_s
        """Seconds a job may take from its submission (queue included) unless `run` says."""
        self.max_rss = max_rss
        """Bytes of resident memory a worker may reach in a job (0: no bound)."""
        self.nice = nice
        self.workers = max(1, workers)
        self.limit = self.workers + max(0, queue)
        self.start_method = start_method
        self.executor: ProcessPoolExecutor | None = None
        self.free = list(range(self.limit))
        self.lock = threading.Lock()
        self.listeners: dict[int, tuple[asyncio.AbstractEventLoop, Callable]] = {}
        self.flags = None
        self.reports = None
        self.reader: threading.Thread | None = None
        self.spare = None
        """Shared with the workers: [slots no job holds, slots lent to jobs] (`Lender`)."""
        self.spare_lock = None

    @property
    def queued(self) -> bool:
        """Whether a job submitted now would wait behind others for a worker."""
        return self.running >= self.workers

    @property
    def running(self) -> int:
        return self.limit - len(self.free)

    def start(self) -> ProcessPoolExecutor:
        """The executor, started on first use. What it needs from the system (shared memory
        in /dev/shm for the flags and the report queue's locks, processes) may be missing:
        `Busy` then, which the API answers with 503 and Retry-After."""
        if self.executor is None:
            try:
                self._start()
            except OSError as err:
                self.executor = None
                raise Busy(f"cannot start a {self.name} worker now ({err.strerror or err}); "
                           "try again soon", retry_after=30) from None
        return self.executor

    def _start(self) -> None:
        if self.executor is None:
            context = multiprocessing.get_context(self.start_method)
            self.flags = context.RawArray("b", 2 * self.limit)
            """Per slot: its cancel flag, and (at `limit + slot`) whether its job started."""
            self.reports = context.SimpleQueue()
            self.spare = context.RawArray("i", 2)
            self.spare_lock = context.Lock()
            self._publish()
            # the forkserver, not this process, is the parent of its workers
            parent = -1 if self.start_method == "forkserver" else os.getpid()
            self.executor = ProcessPoolExecutor(self.workers, mp_context=context,
                                                initializer=_init,
                                                initargs=(self.flags, self.reports,
                                                          self.nice, parent, self.spare,
                                                          self.spare_lock))
            self.reader = threading.Thread(target=self._read, name=f"{self.name}-reports",
                                           daemon=True)
            self.reader.start()

    def _read(self) -> None:
        reports = self.reports
        while True:
            try:
                item = reports.get()
            except (EOFError, OSError):
                return
            if item is None:
                return
            slot, payload = item
            listener = self.listeners.get(slot)
            if listener is not None:
                loop, callback = listener
                with contextlib.suppress(RuntimeError):  # the loop has closed
                    loop.call_soon_threadsafe(callback, payload)

    def _release(self, slot: int) -> None:
        with self.lock:
            self.listeners.pop(slot, None)
            self.free.append(slot)
            self._publish()

    def _publish(self) -> None:
        """Tell the workers how many slots no job holds (running or queued): what a job may
        borrow. A job that arrives lowers it first, so the borrowers give slots back before
        it needs them (a queued check is never starved by another's helpers)."""
        if self.spare is not None:
            self.spare[0] = max(0, self.workers - self.running)

    async def run(self, fn: Callable, *args, progress: Callable | None = None,
                  cancellable: bool = False, until: float | None = None,
                  start_by: float | None = None, limit_s: float | None = None):
        """`until`: the wall-clock time (`time.time()`) by which the job must end, else the
        pool's `timeout_s` from now; past it the job is stopped and this raises `Busy`.
        `start_by`: a job still waiting for a worker then is dropped (`Busy` too). `limit_s`:
        seconds the job may run once it has started."""
        if until is None and self.timeout_s is not None:
            until = time.time() + self.timeout_s
        with self.lock:
            if not self.free:
                raise Busy(f"{self.running} {self.name} jobs are running or queued on this "
                           "server; try again soon")
            slot = self.free.pop()
            self._publish()
        try:
            executor = self.start()
            self.flags[slot] = 0
            self.flags[self.limit + slot] = 0
            if progress is not None:
                self.listeners[slot] = (asyncio.get_running_loop(), progress)
            future = executor.submit(_call, slot, fn, args, progress is not None,
                                     cancellable or progress is not None, until, self.max_rss,
                                     limit_s)
        except (OSError, BrokenProcessPool) as err:  # no process or shared memory to be had
            self._release(slot)
            self.reset()
            raise Busy(f"cannot start a {self.name} worker now ({err}); try again soon",
                       retry_after=30) from None
        except BaseException:
            self._release(slot)
            raise
        future.add_done_callback(lambda _: self._release(slot))
        try:
            outcome = await self._outcome(future, slot, start_by)
        except asyncio.CancelledError:
            self.flags[slot] = 1  # the job sees it at its next look (the slot stays taken)
            future.cancel()
            raise
        except (BrokenProcessPool, FutureCancelled):
            self.reset(executor)
            raise Busy(f"a {self.name} worker stopped; try again") from None
        if outcome[0] == "stopped":
            raise Busy(self._why_stopped(outcome[1], until), retry_after=10)
        if outcome[0] == "param":
            raise ParamError(outcome[1], outcome[2])
        if outcome[0] == "pipeline":
            raise PipelineError(*outcome[1:])
        if outcome[0] == "move":
            raise MoveError(outcome[1])
        return outcome[1]

    async def _outcome(self, future, slot: int, start_by: float | None):
        waiting = asyncio.wrap_future(future)
        if start_by is None:
            return await waiting
        try:
            return await asyncio.wait_for(asyncio.shield(waiting),
                                          max(0.0, start_by - time.time()))
        except TimeoutError:
            if self.flags[self.limit + slot]:
                return await waiting  # running: its watchdog bounds it
            self.flags[slot] = 1
            future.cancel()
            raise Busy(f"no {self.name} worker was free in time: {self.running} {self.name} "
                       "jobs are running or queued on this server; try again soon") from None

    def _why_stopped(self, reason: str, until: float | None) -> str:
        if reason == "memory":
            return (f"the {self.name} job needed more than {self.max_rss >> 20} MiB of memory "
                    "(a limit of this server) and was stopped")
        if reason == "deadline":
            return (f"the {self.name} job did not end in time (this server's limit: "
                    f"{self.timeout_s or 0:g} s with its wait for a worker) and was stopped")
        return f"the {self.name} job was cancelled"

    def reset(self, broken: ProcessPoolExecutor | None = None) -> None:
        """Drop a broken executor (`broken`, else the current one) and its report reader; the
        next job starts a fresh pair. A job of an executor dropped already resets nothing."""
        if broken is not None and broken is not self.executor:
            return
        executor, self.executor = self.executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
            self._stop_reader()

    def _stop_reader(self) -> None:
        """End the report reader with a sentinel on its queue. A worker killed inside `put`
        (a broken pool terminates its workers) keeps the queue's write lock for ever: past a
        short wait the sentinel goes without it (no live worker writes then), so this never
        hangs the event loop."""
        reports, reader = self.reports, self.reader
        self.reader = None
        if reports is None or reader is None:
            return
        lock = getattr(reports, "_wlock", None)
        held = lock is None or lock.acquire(timeout=STOP_READER_S)
        try:
            with contextlib.suppress(OSError, ValueError):
                reports._writer.send_bytes(_SENTINEL)
        finally:
            if held and lock is not None:
                lock.release()
        reader.join(timeout=STOP_READER_S)

    def shutdown(self, grace_s: float = GRACE_S) -> None:
        """Stop the workers: running jobs are told to cancel and get `grace_s` to stop; a
        worker still busy then (a loop that does not look at its flag) is terminated, then
        killed. Then the report reader stops."""
        executor, self.executor = self.executor, None
        if executor is None:
            return
        if self.flags is not None:
            for i in range(self.limit):
                self.flags[i] = 1
        processes = list((getattr(executor, "_processes", None) or {}).values())
        executor.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + grace_s
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join(1.0)
            if process.is_alive():
                process.kill()
                process.join(1.0)
        manager = getattr(executor, "_executor_manager_thread", None)
        if manager is not None:
            manager.join(timeout=2)
        self._stop_reader()
        # Their POSIX semaphores are unlinked when they are collected: uvicorn ends by raising
        # the SIGTERM it caught again, which skips the atexit hook that would (the resource
        # tracker then warns of "leaked semaphore objects").
        del executor, processes, manager
        self.reports = self.spare_lock = None

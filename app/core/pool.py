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
import multiprocessing
import os
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


def _init(flags, reports, nice: int, parent: int) -> None:
    """Runs first in each worker. The workers run at a lower priority than the server: on a
    small machine a search takes the idle CPU, not the event loop's. A worker whose server
    process dies (even by SIGKILL, which runs no clean-up) exits within `WATCH_S`."""
    global _flags, _reports
    _flags, _reports = flags, reports
    if nice:
        with contextlib.suppress(OSError, AttributeError):
            os.nice(nice)
    watched = os.getppid() if parent < 0 else parent
    threading.Thread(target=_watch_parent, args=(watched,), name="parent-watch",
                     daemon=True).start()


GRACE_S = 3.0
"""How long shutdown waits for cancelled jobs before it terminates their workers."""
WATCH_S = 0.5
"""How often a worker looks whether the server process that started it is still there."""


def _watch_parent(parent: int) -> None:
    """Exit once the parent is gone: the worker is then a child of another process (init, a
    subreaper), so `getppid` changes; a watch thread, unlike PR_SET_PDEATHSIG, does not fire
    when merely the thread that started the worker ends."""
    while True:
        if os.getppid() != parent:
            os._exit(70)
        time.sleep(WATCH_S)


class Flag:
    """A job's cancel flag, as seen from the worker."""

    def __init__(self, slot: int):
        self.slot = slot

    def is_set(self) -> bool:
        return bool(_flags[self.slot])

    def set(self) -> None:
        _flags[self.slot] = 1


def _report(slot: int) -> Callable:
    return lambda payload: _reports.put((slot, payload))


def _call(slot: int, fn: Callable, args: tuple, reporting: bool, cancellable: bool):
    """Run `fn(*args[, report, cancel])` in the worker; errors that carry a field come back
    as values (an exception with extra constructor arguments does not survive pickling)."""
    extra = ()
    if cancellable:
        extra = (_report(slot) if reporting else None, Flag(slot))
    try:
        return ("ok", fn(*args, *extra))
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
                 nice: int = 10):
        self.name = name
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
            self.flags = context.RawArray("b", self.limit)
            self.reports = context.SimpleQueue()
            # the forkserver, not this process, is the parent of its workers
            parent = -1 if self.start_method == "forkserver" else os.getpid()
            self.executor = ProcessPoolExecutor(self.workers, mp_context=context,
                                                initializer=_init,
                                                initargs=(self.flags, self.reports,
                                                          self.nice, parent))
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

    async def run(self, fn: Callable, *args, progress: Callable | None = None,
                  cancellable: bool = False):
        with self.lock:
            if not self.free:
                raise Busy(f"{self.running} {self.name} jobs are running or queued on this "
                           "server; try again soon")
            slot = self.free.pop()
        try:
            executor = self.start()
            self.flags[slot] = 0
            if progress is not None:
                self.listeners[slot] = (asyncio.get_running_loop(), progress)
            future = executor.submit(_call, slot, fn, args, progress is not None,
                                     cancellable or progress is not None)
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
            outcome = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            self.flags[slot] = 1  # the job sees it at its next look (the slot stays taken)
            future.cancel()
            raise
        except (BrokenProcessPool, FutureCancelled):
            self.reset()
            raise Busy(f"a {self.name} worker stopped; try again") from None
        if outcome[0] == "param":
            raise ParamError(outcome[1], outcome[2])
        if outcome[0] == "pipeline":
            raise PipelineError(*outcome[1:])
        if outcome[0] == "move":
            raise MoveError(outcome[1])
        return outcome[1]

    def reset(self) -> None:
        """Drop a broken executor; the next job starts a fresh one."""
        executor, self.executor = self.executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

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
        with contextlib.suppress(OSError, ValueError):
            self.reports.put(None)
        if self.reader is not None:
            self.reader.join(timeout=5)

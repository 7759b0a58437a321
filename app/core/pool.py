"""Bounded pools of worker processes for CPU-heavy work (schedule checks, long run builds).

A pure-Python search holds the GIL: in a thread it starves the event loop (and every other
client). In a worker process it does not. Each pool runs at most `workers` jobs and queues at most
`queue` more; past that `Busy` (the API answers 503 with Retry-After). Each job has a slot with a
shared cancel flag that the job polls (`Flag.is_set`, the `threading.Event` method the checker
already calls), so a job whose client went away stops within milliseconds, and a shared progress
queue that carries its reports back to the event loop. What runs in the worker (its watchdog, the
flag, the lender of idle slots) is app/core/worker.py. No FastAPI imports: workers stay light.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import pickle
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from app.core.worker import CANCEL_GRACE_S, Lender, init_worker, lender, run_job
from app.scenarios import ParamError, PipelineError
from app.sim.machine import MoveError

__all__ = ["CANCEL_GRACE_S", "GRACE_S", "Busy", "Lender", "WorkPool", "lender"]


class Busy(Exception):
    """Every worker is busy and the queue is full (or a worker cannot be started now)."""

    def __init__(self, what: str, retry_after: int = 5):
        super().__init__(what)
        self.retry_after = retry_after


GRACE_S = 3.0
"""How long shutdown waits for cancelled jobs before it terminates their workers."""
STOP_READER_S = 1.0
"""How long ending a report reader waits for its queue's write lock, then for the thread."""
_SENTINEL = pickle.dumps(None)

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
                                                initializer=init_worker,
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
            future = executor.submit(run_job, slot, fn, args, progress is not None,
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

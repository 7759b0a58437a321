"""The worker-process pool under each start method Linux offers: jobs run in another process,
a full pool answers `Busy`, a cancelled job's flag reaches its worker, errors keep their field."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest

from app.core.pool import Busy, WorkPool
from app.scenarios import ParamError
from tests.asyncutil import run_async


def pid() -> int:
    return os.getpid()


def spin(seconds: float, report, cancel) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cancel.is_set():
            return "cancelled"
        report({"at": time.monotonic()})
        time.sleep(0.01)
    return "done"


def refuse() -> None:
    raise ParamError("stages", "stages must be in 1..16")


@pytest.mark.parametrize("method", ["spawn", "fork", "forkserver"])
def test_pool_under_each_start_method(method):
    pool = WorkPool("test", 1, 1, method)

    async def scenario():
        assert await pool.run(pid) != os.getpid()
        reports = []
        job = asyncio.ensure_future(pool.run(spin, 30.0, progress=reports.append))
        await asyncio.sleep(0.5)
        queued = asyncio.ensure_future(pool.run(pid))
        await asyncio.sleep(0.05)
        with pytest.raises(Busy):
            await pool.run(pid)
        job.cancel()
        started = time.monotonic()
        assert isinstance(await queued, int)  # the worker was freed by the cancel flag
        with pytest.raises(ParamError) as err:
            await pool.run(refuse)
        return reports, time.monotonic() - started, err.value.field

    try:
        reports, freed_after, field = run_async(scenario, 60)
    finally:
        pool.shutdown()
    assert reports and freed_after < 1.0 and field == "stages"
    assert pool.executor is None


def test_shutdown_unlinks_the_pools_semaphores():
    """uvicorn ends by raising the SIGTERM it caught again, so no atexit hook unlinks them: the
    pool lets go of them at shutdown (else the resource tracker warns of leaked semaphores)."""
    import _multiprocessing

    pool = WorkPool("test", 1, 0)
    try:
        run_async(lambda: pool.run(pid), 60)
        names = [lock._semlock.name for lock in (pool.reports._rlock, pool.reports._wlock,
                                                 pool.spare_lock)]
    finally:
        pool.shutdown()
    assert all(names)
    for name in names:
        with pytest.raises(FileNotFoundError):
            _multiprocessing.sem_unlink(name)


def _readers(name: str) -> list:
    return [t for t in threading.enumerate() if t.name == f"{name}-reports" and t.is_alive()]


def test_a_broken_pool_leaves_no_report_reader_behind():
    """A worker killed under the pool breaks it; the pool starts afresh with one reader (the
    old one, blocked on the old queue, is ended by a sentinel)."""
    pool = WorkPool("broken", 1, 0)

    async def scenario():
        worker = await pool.run(pid)
        os.kill(worker, signal.SIGKILL)
        with pytest.raises(Busy):
            for _ in range(50):  # bounded: the pool sees the death at once or after a job
                await pool.run(pid)
        assert await pool.run(pid) != worker
        return await pool.run(pid)

    try:
        assert isinstance(run_async(scenario, 60), int)
        assert len(_readers("broken")) == 1
    finally:
        pool.shutdown()
    assert _readers("broken") == []


def test_reset_ends_the_reader_when_a_dead_worker_holds_the_queues_lock():
    """A worker terminated inside `put` keeps the report queue's write lock: the sentinel goes
    without it after a short wait, so reset neither hangs nor leaves the reader."""
    pool = WorkPool("locked", 1, 0)
    try:
        run_async(lambda: pool.run(pid), 60)
        reader = pool.reader
        assert pool.reports._wlock.acquire(timeout=1)  # as if a worker had died holding it
        pool.reset()
        assert not reader.is_alive() and pool.executor is None
        pool.reports._wlock.release()
        assert isinstance(run_async(lambda: pool.run(pid), 60), int)
        assert len(_readers("locked")) == 1
    finally:
        pool.shutdown()

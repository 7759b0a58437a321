"""This process's worker pools: schedule checks and run builds (`app.core.pool`), and the helper
that cancels a job the moment its HTTP client goes away."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from fastapi import Request

from app.core.config import settings
from app.core.pool import WorkPool

checks = WorkPool("check", settings.check_concurrency, settings.check_queue,
                  settings.pool_start_method,
                  max_rss=(3 * settings.check_max_memory_mb + 512) << 20)
"""Each check's deadline comes from its own `timeout_s` (app.api.routes.check). Its memory
bound is the search's own estimate's (`MBI_CHECK_MAX_MEMORY_MB`) with room: a stored state
costs about 2.6 times its estimate in resident memory (docs/checker.md), so the watchdog only
stops a check whose estimate went wrong."""
builds = WorkPool("build", settings.build_workers, settings.build_queue,
                  settings.pool_start_method, timeout_s=settings.build_timeout_s,
                  max_rss=settings.worker_max_memory_mb << 20)

windows = WorkPool("window", settings.window_workers, settings.window_queue,
                   settings.pool_start_method, nice=2, timeout_s=settings.build_timeout_s,
                   max_rss=settings.worker_max_memory_mb << 20)
"""Trace windows (app.api.windows): tens of milliseconds each, never behind a class's builds;
at a priority between the server's and the checks' (a window is due seconds ahead, a check's
answer later still)."""


def shutdown() -> None:
    """Called at application shutdown (lifespan): stop every worker process."""
    checks.shutdown()
    builds.shutdown()
    windows.shutdown()


async def unless_gone(request: Request, work: Awaitable):
    """`await work`, cancelled as soon as the client disconnects (then None is returned)."""
    task = asyncio.ensure_future(work)

    async def gone() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                return

    watcher = asyncio.ensure_future(gone())
    try:
        done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        watcher.cancel()
        raise
    if task in done:
        watcher.cancel()
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return None

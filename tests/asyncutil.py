"""Run a coroutine on an event loop of its own, in a thread of its own.

The browser tests drive Chromium with Playwright's sync API, which keeps an asyncio loop running in
the main thread for the whole session; `asyncio.run` there would fail, whatever the test order.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable


def run_async(make: Callable[[], Awaitable], timeout: float = 30.0):
    """`asyncio.run(make())` in a fresh thread; returns its result or raises its error."""
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["result"] = asyncio.run(asyncio.wait_for(make(), timeout))
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout + 5)
    if thread.is_alive():
        raise TimeoutError(f"the coroutine did not finish in {timeout} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]

"""One computation for many callers: the first caller of a key runs it, and everyone who asks
for that key while it runs awaits the same answer (a class opening one lesson: one build)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def shared(pending: dict, key, work: Callable[[], Awaitable[T]]) -> T:
    """`work()`'s answer for `key`, run once however many callers ask at once (`pending` holds
    the keys in flight). A caller that leaves cancels only its own wait, unless it is the one
    running the work; an error reaches every waiter."""
    future = pending.get(key)
    if future is None:
        future = pending[key] = asyncio.get_running_loop().create_future()
        try:
            future.set_result(await work())
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as err:
            future.set_exception(err)
            future.exception()  # retrieved: no "never retrieved" warning if no one waits
            raise
        finally:
            del pending[key]
    return await asyncio.shield(future)

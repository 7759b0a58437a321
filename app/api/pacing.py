"""How a session WebSocket's played frames go out (app.api.stream): one task paces every playing
stream of the process (`Ticker`), and one task per client sends its messages (`Outbox`), which
drops a client that does not read."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import logging
import time

from fastapi import WebSocket

from app.core.config import settings

logger = logging.getLogger(__name__)


class Ticker:
    """Paces every playing stream of this process from one task: one timer wakes it at most
    every `GRAIN` seconds, and it calls each stream whose step is due (a stream's `tick(now)`
    returns when it is due next, or None when it stops). A timer and a task per playing client
    cost more than the step itself."""

    GRAIN = 0.002

    def __init__(self) -> None:
        self.heap: list = []
        self.order = itertools.count()
        self.task: asyncio.Task | None = None

    def add(self, tick, due: float) -> None:
        loop = asyncio.get_running_loop()
        if self.task is not None and self.task.get_loop() is not loop:
            self.heap, self.task = [], None  # a new event loop (tests): the old one's are gone
        heapq.heappush(self.heap, (due, next(self.order), tick))
        if self.task is None or self.task.done():
            self.task = loop.create_task(self.run())

    async def run(self) -> None:
        heap = self.heap
        while heap:
            delay = heap[0][0] - time.monotonic()
            await asyncio.sleep(min(max(delay, self.GRAIN), 0.05))
            now = time.monotonic()
            while heap and heap[0][0] <= now:
                _, _, tick = heapq.heappop(heap)
                try:
                    due = tick(now)
                except Exception:  # noqa: BLE001 - one stream's failure stops that stream only
                    logger.exception("a playing stream failed")
                    continue
                if due is not None:
                    heapq.heappush(heap, (due, next(self.order), tick))


ticker = Ticker()




class Outbox:
    """Messages to one client, sent by one task: a client that does not read piles them up
    here, and past `settings.ws_send_buffer` bytes it is dropped."""

    def __init__(self, websocket: WebSocket):
        self.websocket = websocket
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.pending = 0
        self.overflowed = False
        self.sender = asyncio.create_task(self.pump())

    def put(self, message: dict | str) -> None:
        text = message if isinstance(message, str) else json.dumps(message,
                                                                    separators=(",", ":"))
        self.pending += len(text)
        if self.pending > settings.ws_send_buffer:
            self.overflowed = True
            self.sender.cancel()
            return
        self.queue.put_nowait(text)

    async def pump(self) -> None:
        while True:
            text = await self.queue.get()
            await self.websocket.send_text(text)
            self.pending -= len(text)

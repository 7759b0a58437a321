"""Server-sent events for read-only clients: one `state` event per step from the session's step
(or `from`) to the end, then `end`. Each event's `id` is its step, so a reconnecting client
(`Last-Event-ID`) resumes after the last step it saw. SSE streams count against the same bound
as WebSockets (`settings.max_sessions` per process)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import replace

from fastapi import Request
from fastapi.responses import StreamingResponse

from app.api.errors import fail
from app.api.runstore import Entry
from app.api.stream import Stream, streams
from app.api.token import SessionToken
from app.core.clients import address, session_client, stream_slot


def event_stream(request: Request, token: SessionToken, entry: Entry, first: int | None,
                 steps_per_s: float) -> StreamingResponse:
    start = token.step if first is None else first
    last_id = request.headers.get("last-event-id")
    if last_id is not None:
        if not last_id.isdigit() or len(last_id) > 9:
            raise fail(422, "header", "last-event-id", "Last-Event-ID must be a step number")
        start = int(last_id) + 1
    if streams.full():
        raise fail(503, "server", "streams", "this server has too many open streams; retry")
    slot = contextlib.ExitStack()
    slot.enter_context(stream_slot(session_client(token), address(request.scope)))
    stream = Stream(replace(token, step=max(0, start - 1)), entry)
    total = entry.run.total_steps

    async def lines():
        streams.open += 1  # counted while the generator runs, so it is always given back
        try:
            yield "retry: 1000\n\n"
            delay = 1.0 / steps_per_s
            next_at = time.monotonic()
            if start == 0:
                stream.token = replace(stream.token, step=0)
                data = stream.message(playing=True, speed=steps_per_s)
                yield f"id: 0\nevent: state\ndata: {data}\n\n"
            while stream.token.step < total:
                data = stream.message(stream.advance(), playing=True, speed=steps_per_s)
                yield f"id: {stream.token.step}\nevent: state\ndata: {data}\n\n"
                next_at += delay
                wait = next_at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if await request.is_disconnected():
                    return
            done = {"type": "end", "total_steps": total, "status": entry.run.status}
            yield f"event: end\ndata: {json.dumps(done)}\n\n"
        finally:
            streams.open -= 1

    return HeldStream(slot, lines(), media_type="text/event-stream",
                      headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


class HeldStream(StreamingResponse):
    """A stream that holds its client's stream slots until it is done, however it ends (even
    when its client leaves before the first byte, and the generator never runs)."""

    def __init__(self, slot: contextlib.ExitStack, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.slot = slot

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slot.close()

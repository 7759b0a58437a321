"""The session WebSocket: a client's cursor over a session, played in wall-clock time (pacing lives
here, not in the engine).

Bounded on every side: commands are JSON objects of at most 4 KB, parsed with a depth limit, at
most `settings.ws_messages_per_s` a second (a token bucket; the excess is answered with one
error and dropped, and a client that keeps flooding is disconnected); a client that does not read
is dropped once `settings.ws_send_buffer` bytes wait for it; open streams (WebSocket and SSE
together) are bounded by `settings.max_sessions`. Answers carry the session id, played frames
every `ID_EVERY` steps, so a client that reconnects resumes where it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import replace
from functools import lru_cache

from fastapi import HTTPException, WebSocket, WebSocketDisconnect

from app.api.pacing import Outbox, ticker
from app.api.runstore import Entry, store
from app.api.session import (
    clamp_step,
    clients_of,
    diagnostics_near,
    frame_json,
    open_token,
    patch_json,
    picks_by_name,
    scenario_block,
)
from app.api.session import step_session as step_once
from app.api.sources import NeedSource
from app.api.token import SessionToken
from app.core.clients import TooMany, address, charge_request, session_client, stream_slot
from app.core.config import settings
from app.core.pool import Busy
from app.core.security import BodyError, check_json
from app.scenarios import ParamError
from app.sim.machine import Machine, MoveError

logger = logging.getLogger(__name__)

MAX_SPEED = 240.0
"""Steps per second a stream may play at."""
MIN_SPEED = 0.1
MAX_COMMAND = 4096
FLOOD_FACTOR = 20
"""A client that sends this many times its allowance in one burst is disconnected (1008)."""
ID_EVERY = 16
"""Played frames carry the session id every this many steps (a command's answer always does):
enough for a client that reconnects (it seeks to its own step) to hold an id that is fresh."""


class Flood(Exception):
    """A client that keeps flooding after being told to stop."""


class Streams:
    """Open streams of this process (WebSocket and SSE), bounded by `settings.max_sessions`."""

    def __init__(self) -> None:
        self.open = 0

    def full(self) -> bool:
        return self.open >= settings.max_sessions


streams = Streams()


def speed(raw, field: str = "steps_per_s") -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ParamError(field, f"{field} must be a number of steps per second")
    if not MIN_SPEED <= raw <= MAX_SPEED:
        raise ParamError(field, f"{field} must be in [{MIN_SPEED:g}, {MAX_SPEED:g}]")
    return float(raw)


class Stream:
    """One client's cursor over a session. Its messages are JSON text around the run's shared
    frames, so a class watching one lesson costs one move and one encoding per step; a playing
    stream keeps a machine of its own at its cursor, so a run no one shares costs one move per
    step, not a thaw."""

    def __init__(self, token: SessionToken, entry: Entry):
        self.token = token
        self.entry = entry
        self.cursor: Machine | None = None
        self.before: dict | None = None
        self.patches = False
        """The client applies snapshot patches (it said so in `play`): played frames carry
        `patch` (what changed since the step before) in place of `snapshot`."""

    def advance(self) -> str:
        """The cursor one step on (playing), as a frame."""
        step = self.token.step + 1
        if self.cursor is None:
            self.cursor = self.entry.machine_at(self.token.step, Machine(self.entry.run.cfg))
            self.before = None
        if self.patches:
            text, self.before = patch_json(self.entry, step, self.cursor, self.before)
        else:
            text = frame_json(self.entry, step, self.cursor)
        self.token = replace(self.token, step=step)
        return text

    def message(self, frame: str | None = None, *, changed: bool = False, **extra) -> str:
        token, entry = self.token, self.entry
        parts = ['{"type":"state",']
        if frame is None:
            self.cursor = None  # moved by a command: the next play thaws a fresh one
            parts.append(frame_json(entry, token.step)[1:-1])
        else:
            parts.append(frame[1:-1])
        if frame is None or token.step % ID_EVERY == 0:
            parts.append(f',"id":"{token.encode()}"')
        if extra:
            parts.append(_extra_json(tuple(i for i in extra.items() if i[0] != "generation")))
        if changed:
            run = entry.run
            more = {"changed": True, "scenario": scenario_block(token.key, run),
                    **diagnostics_near(run.diagnostics, token.step),
                    "picks": picks_by_name(entry, token.key)}
            parts += [",", json.dumps(more, separators=(",", ":"))[1:-1]]
        parts.append("}")
        return "".join(parts)


@lru_cache(maxsize=256)
def _extra_json(items: tuple) -> str:
    return "," + json.dumps(dict(items), separators=(",", ":"))[1:-1]


def error_message(err: Exception) -> dict:
    if isinstance(err, ParamError):
        return {"type": "error", "status": 422, "field": err.field, "message": err.message}
    if isinstance(err, MoveError):
        return {"type": "error", "status": 409, "field": "agent", "message": str(err)}
    if isinstance(err, Busy):
        return {"type": "error", "status": 503, "field": "server", "message": str(err)}
    if isinstance(err, TooMany):
        return {"type": "error", "status": 429, "field": "server", "retry_after":
                err.retry_after, "message": f"{err.what}: past this server's share for one "
                                            f"client; retry after {err.retry_after} s"}
    detail = err.detail[0] if isinstance(err.detail, list) else {"loc": ["session_id"],
                                                                  "msg": str(err.detail)}
    return {"type": "error", "status": err.status_code, "field": detail["loc"][-1],
            "message": detail["msg"]}


def parse_command(text) -> dict:
    """One command: a JSON object of at most 4 KB, nested at most as deep as a body may be."""
    if not isinstance(text, str) or len(text) > MAX_COMMAND:
        raise ParamError("type", f"send one JSON text message of at most {MAX_COMMAND} bytes")
    try:
        check_json(text.encode())
        command = json.loads(text)
    except BodyError as err:
        raise ParamError(str(err.loc[-1]), err.message) from None
    except ValueError:
        raise ParamError("type", "a command is one JSON object") from None
    if not isinstance(command, dict):
        raise ParamError("type", "a command is one JSON object")
    return command


async def play_socket(websocket: WebSocket, session_id: str) -> None:
    """Messages in: `{"type": "play" | "pause" | "step" | "back" | "seek" | "reset" | "speed"}`
    with `agent`, `step` or `steps_per_s` (`play` with `"patches": true`: played frames carry a
    `patch` of the snapshot before, see `app.sim.snapshot.patch`). Out: `{"type": "state", ...}`
    after every command and every played step, `{"type": "error", "status", "field",
    "message"}` for a refused command."""
    await websocket.accept()
    try:
        charge_request(websocket.scope)  # the middleware charges HTTP requests, not sockets
        token, entry = await open_token(session_id)
    except NeedSource as err:
        await websocket.send_json({"type": "error", "status": 409, "field": "session_id",
                                   "need_source": err.sha256,
                                   "message": "post the pipeline text to "
                                              "/api/v1/pipelines/sources, then reconnect"})
        await websocket.close(code=4409)
        return
    except (HTTPException, Busy, TooMany) as err:
        message = error_message(err)
        await websocket.send_json(message)
        await websocket.close(code=4000 + message["status"])
        return
    if streams.full():
        await websocket.send_json({"type": "error", "status": 503, "field": "session_id",
                                   "message": "this server has too many open streams; retry"})
        await websocket.close(code=1013)
        return
    slot = contextlib.ExitStack()
    try:
        slot.enter_context(stream_slot(session_client(token), address(websocket.scope)))
    except TooMany as err:
        await websocket.send_json(error_message(err))
        await websocket.close(code=1013)
        return
    streams.open += 1
    stream = Stream(token, entry)
    state = {"playing": False, "speed": 4.0, "generation": 0}
    outbox = Outbox(websocket)
    rate = settings.ws_messages_per_s
    allowance, checked = float(rate), time.monotonic()

    def play() -> None:
        """Advance one step every 1/speed s until the end or a pause (paced by the ticker)."""
        generation = state["generation"] = state["generation"] + 1
        next_at = time.monotonic() + 1.0 / state["speed"]

        def tick(now: float) -> float | None:
            nonlocal next_at
            if not state["playing"] or state["generation"] != generation or outbox.overflowed:
                return None
            if stream.token.step >= stream.entry.run.total_steps:
                state["playing"] = False
                outbox.put(stream.message(**state))
                return None
            outbox.put(stream.message(stream.advance(), **state))
            next_at += 1.0 / state["speed"]
            if next_at < now:
                next_at = now  # fell behind: do not burst to catch up
            return next_at

        ticker.add(tick, next_at)

    def stop() -> None:
        state["playing"] = False

    async def receive() -> str | None:
        """The next text message (None for a binary one); raises WebSocketDisconnect."""
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(message.get("code", 1000))
        return message.get("text")

    async def commands() -> None:
        nonlocal allowance, checked
        dropped = 0
        while True:
            text = await receive()
            now = time.monotonic()
            allowance = min(float(rate), allowance + (now - checked) * rate)
            checked = now
            if allowance < 1:
                if not dropped:  # say it once per burst, then drop silently
                    outbox.put(error_message(ParamError(
                        "type", f"at most {rate} commands a second; dropping the excess")))
                dropped += 1
                if dropped > FLOOD_FACTOR * rate:
                    raise Flood
                continue
            dropped = 0
            allowance -= 1
            try:
                await obey(parse_command(text))
            except (ParamError, MoveError, HTTPException, Busy, TooMany) as err:
                outbox.put(error_message(err))

    async def obey(command: dict) -> None:
        kind = command.get("type")
        changed = False
        if kind == "play":
            stream.patches = command.get("patches") is True
            if "steps_per_s" in command:
                state["speed"] = speed(command["steps_per_s"])
            if not state["playing"]:
                if stream.token.step >= stream.entry.run.total_steps:
                    stream.token = replace(stream.token, step=0)
                    stream.cursor = None
                state["playing"] = True
                play()
            return
        if kind == "speed":
            state["speed"] = speed(command.get("steps_per_s"))
            outbox.put({"type": "speed", "speed": state["speed"]})
            return
        if kind == "pause":
            stop()
        elif kind == "step":
            stop()
            agent = command.get("agent")
            if agent is not None and (not isinstance(agent, str) or len(agent) > 80):
                raise ParamError("agent", "agent must be a mover's name")
            old = stream.entry
            stream.token, stream.entry = await step_once(stream.token, agent, stream.entry)
            changed = stream.entry is not old
        elif kind == "back":
            stop()
            if stream.token.step == 0:
                raise ParamError("step", "already at step 0")
            stream.token = replace(stream.token, step=stream.token.step - 1)
        elif kind == "seek":
            stop()
            target = command.get("step")
            if isinstance(target, bool) or not isinstance(target, int):
                raise ParamError("step", "step must be an integer")
            stream.token = replace(stream.token, step=clamp_step(target, stream.entry))
        elif kind == "reset":
            stop()
            key = replace(stream.token.key, picks=())
            changed = key != stream.token.key
            stream.entry = await store.get(key, clients=clients_of(stream.token))
            stream.token = replace(stream.token, key=key, step=0)
        else:
            raise ParamError("type", "type must be one of play, pause, speed, step, back, "
                                     "seek, reset")
        outbox.put(stream.message(changed=changed, **state))

    reader = asyncio.create_task(commands())
    try:
        outbox.put(stream.message(changed=True, **state))
        await asyncio.wait({reader, outbox.sender}, return_when=asyncio.FIRST_COMPLETED)
        if reader.done() and not reader.cancelled() and isinstance(reader.exception(), Flood):
            outbox.overflowed = True  # closed with 1008 below, like a client that does not read
        elif reader.done() and not reader.cancelled() and not isinstance(
                reader.exception(), WebSocketDisconnect):
            reader.result()
    finally:
        state["playing"] = False
        for task in (reader, outbox.sender):
            task.cancel()
        streams.open -= 1
        slot.close()
        for task in (reader, outbox.sender):
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: a client that left is not an error
        if outbox.overflowed:
            with contextlib.suppress(Exception, asyncio.TimeoutError):
                await asyncio.wait_for(websocket.close(code=1008, reason="flooding or not reading"),
                                       5)

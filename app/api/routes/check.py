"""`POST /api/v1/check`: explore every schedule of a small configuration and answer `safe`, or the
shortest counterexample trace for each diagnostic kind it can reach (docs/checker.md).

The search is CPU-bound, so it runs in a worker thread and the event loop keeps serving other
requests; at most `MBI_CHECK_CONCURRENCY` checks run at once per process (others get a 503), and
each is bounded in states, time and memory. `POST /check/stream` and `GET /check/stream` (for
`EventSource`) send the same answer as server-sent events, after `progress` events.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from app.check.engine import Limits, Progress
from app.check.service import (
    DEFAULT_MAX_STATES,
    DEFAULT_TIMEOUT_S,
    MAX_MEMORY,
    MAX_STATES,
    MAX_TIMEOUT_S,
    check_config,
    scenario_for,
)
from app.scenarios import PARAM_NAMES, ParamError

router = APIRouter(prefix="/check", tags=["check"])

CONCURRENCY = int(os.environ.get("MBI_CHECK_CONCURRENCY", "2"))
_slots = threading.BoundedSemaphore(CONCURRENCY)
QUERY_NAMES = {"scenario", "bugs", "max_states", "timeout_s", *PARAM_NAMES}


class CheckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scenario: Annotated[str, Field(max_length=80)]
    params: dict[str, StrictInt] = Field(default_factory=dict, max_length=len(PARAM_NAMES))
    bugs: Annotated[list[Annotated[str, Field(max_length=60)]], Field(max_length=16)] = []
    max_states: Annotated[StrictInt, Field(ge=1, le=MAX_STATES)] = DEFAULT_MAX_STATES
    timeout_s: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S)] = DEFAULT_TIMEOUT_S


class Violation(BaseModel):
    kind: str
    steps: int
    shortest: bool
    """False only in an inconclusive answer, when a shorter schedule may exist."""
    diagnostic: dict[str, Any]
    trace: dict[str, Any]


class CheckResponse(BaseModel):
    verdict: str
    violations: list[Violation]
    states_explored: int
    elapsed_s: float
    transitions: int
    depth: int
    """Every schedule of at most this many steps was checked (all of them when not stopped)."""
    stopped_by: str | None
    limits: dict[str, float]
    message: str


class _Job:
    """A validated check: the scenario and configuration, resolved before any work starts."""

    def __init__(self, body: CheckRequest, location: str):
        try:
            self.scenario = scenario_for(body.scenario)
        except ParamError as err:
            raise _FieldError(location, ("scenario",), err.message) from None
        try:
            self.cfg = self.scenario.resolve(body.params, body.bugs)
        except ParamError as err:
            nested = location == "body" and err.field != "bugs"
            where = ("params", err.field) if nested else (err.field,)
            raise _FieldError(location, where, err.message) from None
        self.limits = Limits(body.max_states, body.timeout_s, MAX_MEMORY)

    def run(self, progress=None, cancel: threading.Event | None = None) -> dict:
        return check_config(self.scenario, self.cfg, self.limits, progress, cancel)


class _FieldError(Exception):
    def __init__(self, location: str, where: tuple[str, ...], message: str):
        self.location, self.where, self.message = location, where, message

    def response(self) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": [
            {"loc": [self.location, *self.where], "msg": self.message, "type": "value_error"}]})


def _busy() -> JSONResponse:
    return JSONResponse(status_code=503, headers={"Retry-After": "5"}, content={
        "detail": f"{CONCURRENCY} checks are already running on this server; try again soon"})


@router.post("", response_model=CheckResponse)
async def post_check(body: CheckRequest):
    """Check every schedule; the whole answer at once."""
    try:
        job = _Job(body, "body")
    except _FieldError as err:
        return err.response()
    if not _slots.acquire(blocking=False):
        return _busy()
    cancel = threading.Event()
    try:
        result = await asyncio.to_thread(job.run, None, cancel)
    finally:
        cancel.set()
        _slots.release()
    return JSONResponse(result)


@router.post("/stream")
async def post_check_stream(body: CheckRequest):
    """The same check as server-sent events: `progress` events, then one `result` event."""
    try:
        job = _Job(body, "body")
    except _FieldError as err:
        return err.response()
    return _stream(job)


@router.get("/stream")
async def get_check_stream(
    request: Request,
    scenario: Annotated[str, Query(max_length=80)],
    stages: int | None = None,
    tiles: int | None = None,
    tile_bytes: int | None = None,
    chunk_bytes: int | None = None,
    consumers: int | None = None,
    bugs: Annotated[str, Query(max_length=400)] = "",
    max_states: Annotated[int, Query(ge=1, le=MAX_STATES)] = DEFAULT_MAX_STATES,
    timeout_s: Annotated[float, Query(gt=0, le=MAX_TIMEOUT_S)] = DEFAULT_TIMEOUT_S,
):
    """`POST /check/stream` for `EventSource`: the request as query parameters."""
    for name in request.query_params:
        if name not in QUERY_NAMES:
            return _FieldError("query", (name,), f"unknown query parameter {name[:40]!r}; "
                               f"known: {', '.join(sorted(QUERY_NAMES))}").response()
    params = {"stages": stages, "tiles": tiles, "tile_bytes": tile_bytes,
              "chunk_bytes": chunk_bytes, "consumers": consumers}
    body = CheckRequest.model_construct(
        scenario=scenario, params={k: v for k, v in params.items() if v is not None},
        bugs=[b.strip() for b in bugs.split(",") if b.strip()], max_states=max_states,
        timeout_s=timeout_s)
    try:
        job = _Job(body, "query")
    except _FieldError as err:
        return err.response()
    return _stream(job)


def _stream(job: _Job):
    """Start the check in a worker thread now (it frees its slot when done, whatever happens to
    the client) and stream what it reports; a client that goes away cancels it."""
    if not _slots.acquire(blocking=False):
        return _busy()
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    cancel = threading.Event()

    def report(kind: str, payload: dict) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, (kind, payload))

    def work() -> None:
        try:
            outcome = ("result", job.run(lambda p: report("progress", _progress(p)), cancel))
        except Exception as err:  # reported to the client, not swallowed
            outcome = ("error", {"detail": f"{type(err).__name__}: {err}"})
        finally:
            _slots.release()
        report(*outcome)

    loop.run_in_executor(None, work)
    return StreamingResponse(_events(queue, cancel), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _events(queue: asyncio.Queue, cancel: threading.Event):
    try:
        yield _event("progress", _progress(Progress(0, 0, 0, 1, 0.0)))
        while True:
            kind, payload = await queue.get()
            yield _event(kind, payload)
            if kind != "progress":
                break
    finally:
        cancel.set()


def _progress(p: Progress) -> dict:
    return {"states_explored": p.states, "transitions": p.transitions, "depth": p.depth,
            "frontier": p.frontier, "elapsed_s": round(p.elapsed_s, 3)}


def _event(kind: str, payload: dict) -> str:
    return f"event: {kind}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n"

"""`POST /api/v1/check`: explore every schedule of a small configuration and answer `safe`, or the
shortest counterexample trace for each diagnostic kind it can reach (docs/checker.md).

The search runs in the check pool's worker processes (`app.api.work.checks`), never on the event
loop nor under its GIL; past `MBI_CHECK_CONCURRENCY` running and `MBI_CHECK_QUEUE` waiting checks
the answer is 503 with Retry-After. A check whose client goes away is cancelled at once (its
worker polls a shared flag). `POST /check/stream` and `GET /check/stream` (for `EventSource`) send
the same answer as server-sent events, after `progress` events.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from app.api.errors import fail
from app.api.responses import errors
from app.api.routes.pipelines import check_size
from app.api.runs import Params, param_query, params_dict
from app.api.runstore import find_scenario
from app.api.work import builds, checks, unless_gone
from app.check.engine import Limits
from app.check.service import (
    CHECK_GRACE_S,
    DEFAULT_MAX_STATES,
    DEFAULT_TIMEOUT_S,
    MAX_MEMORY,
    MAX_STATES,
    MAX_TIMEOUT_S,
    InternalError,
    check_job,
    check_source_job,
    check_within,
    resolve_source,
)
from app.core.clients import address, checks_held
from app.core.config import settings
from app.core.pool import Busy
from app.scenarios import PARAM_NAMES, ParamError

router = APIRouter(prefix="/check", tags=["check"])

BACKSTOP_S = 2.0
"""How long past its deadline a check that did not stop itself runs before its watchdog stops
it (a loaded machine slows the counterexamples' rebuild, not the search's own stop)."""

QUERY_NAMES = {"scenario", "bugs", "max_states", "timeout_s", "stop_at_first", *PARAM_NAMES}


class CheckRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scenario: Annotated[str, Field(max_length=80)] | None = None
    source: str | None = None
    """A pipeline text (docs/language.md) in place of `scenario`; `params` then names its own
    parameters."""
    params: Annotated[dict[Annotated[str, Field(max_length=80)], StrictInt],
                      Field(max_length=64)] = {}
    """Parameter values by name; each is checked against the scenario's own range."""
    bugs: Annotated[list[Annotated[str, Field(max_length=60)]], Field(max_length=16)] = []
    max_states: Annotated[StrictInt, Field(ge=1, le=MAX_STATES)] = DEFAULT_MAX_STATES
    timeout_s: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S)] = DEFAULT_TIMEOUT_S
    stop_at_first: StrictBool = False
    """Answer at the first violation whose shortest schedule is known (docs/checker.md)."""


class Violation(BaseModel):
    kind: str
    steps: int
    shortest: bool
    """False only in an inconclusive answer, when a shorter schedule may exist."""
    diagnostic: dict[str, Any]
    trace: dict[str, Any]
    cycle_from: int | None = None
    """A livelock only: the first step of the lasso's cycle (docs/checker.md, "Livelock")."""


class CheckResponse(BaseModel):
    verdict: str
    violations: list[Violation]
    states_explored: int
    elapsed_s: float
    transitions: int
    persistent_states: int | None = None
    """States the partial-order reduction's pass stored, where it applies (docs/checker.md,
    "Reduction 4"); `states_explored` counts it and the bounded second pass."""
    workers: int = 1
    """Processes that searched: one (a partitioned parallel search is not built yet)."""
    depth: int
    """Every schedule of at most this many steps was checked (all of them when not stopped)."""
    stopped_by: str | None
    limits: dict[str, float]
    message: str


class _Job:
    """A validated check: the scenario and configuration, resolved before any work starts."""

    def __init__(self, body: CheckRequest, location: str):
        self.limits = Limits(body.max_states, body.timeout_s, MAX_MEMORY, body.stop_at_first)
        self.timeout_s = body.timeout_s
        self.until = time.time() + body.timeout_s + CHECK_GRACE_S
        """When the answer is due, from the request's arrival (a wait for a worker counts)."""
        params = body.params if isinstance(body.params, dict) else params_dict(body.params)
        if (body.source is None) == (body.scenario is None):
            raise fail(422, location, "scenario" if body.source is None else "source",
                       "give either `scenario` (a built-in id) or `source` (a pipeline "
                       "text), not both")
        if body.source is not None:  # parsed and resolved in the worker
            check_size(body.source)
            self.fn, self.work = check_source_job, (body.source, params, body.bugs, self.limits)
            return
        try:
            scenario = find_scenario(body.scenario)
        except ParamError as err:
            raise fail(422, location, "scenario", err.message) from None
        try:
            cfg = scenario.resolve(params, body.bugs)
        except ParamError as err:
            nested = location == "body" and err.field != "bugs"
            where = ("params", err.field) if nested else (err.field,)
            raise fail(422, location, where, err.message) from None
        self.fn, self.work = check_job, (scenario, cfg, self.limits)

    def args(self) -> tuple:
        """What the pool runs: the check with the time it has left when it starts."""
        return (check_within, self.until, self.fn, *self.work)

    def watched(self) -> dict:
        """A check still waiting for a worker at its deadline is dropped (503); a running one
        stops itself by then, and its watchdog stops it `BACKSTOP_S` later if it did not."""
        return {"start_by": self.until - CHECK_GRACE_S, "until": self.until + BACKSTOP_S}

    async def ready(self) -> _Job:
        """A pipeline text is parsed and resolved once in the build pool before the check
        starts, so a text that does not compile is a 422, not an error inside a stream."""
        if self.fn is check_source_job:
            source, params, bugs, _ = self.work
            await builds.run(resolve_source, source, params, bugs)
        return self


@router.post("", response_model=CheckResponse, responses=errors(422, 503))
async def post_check(body: CheckRequest, request: Request):
    """Check every schedule; the whole answer at once."""
    job = await _Job(body, "body").ready()
    try:
        with checks_held.hold(address(request.scope), settings.checks_per_address,
                              retry_after=max(1, round(job.timeout_s))):
            result = await unless_gone(request, checks.run(*job.args(), cancellable=True,
                                                           **job.watched()))
    except Busy as err:
        err.retry_after = max(err.retry_after, round(job.timeout_s))
        raise
    except InternalError as err:  # the one 500: a consistency check failed, named for a report
        return JSONResponse({"detail": str(err)}, status_code=500)
    if result is None:  # the client has gone; no one reads this
        return JSONResponse({"detail": "cancelled"}, status_code=499)
    return Response(result, media_type="application/json")


@router.post("/stream", response_class=StreamingResponse,
             responses=errors(422, 503, ok_body="progress events, then the result",
                              ok_type="sse"))
async def post_check_stream(body: CheckRequest, request: Request):
    """The same check as server-sent events: `progress` events, then one `result` event."""
    return _stream(await _Job(body, "body").ready(), address(request.scope))


@router.get("/stream", response_class=StreamingResponse,
            responses=errors(422, 503, ok_body="progress events, then the result",
                             ok_type="sse"))
async def get_check_stream(
    request: Request,
    scenario: Annotated[str, Query(max_length=80)],
    stages: param_query("stages") = None,
    tiles: param_query("tiles") = None,
    tile_bytes: param_query("tile_bytes") = None,
    chunk_bytes: param_query("chunk_bytes") = None,
    consumers: param_query("consumers") = None,
    bugs: Annotated[str, Query(max_length=400)] = "",
    max_states: Annotated[int, Query(ge=1, le=MAX_STATES)] = DEFAULT_MAX_STATES,
    timeout_s: Annotated[float, Query(gt=0, le=MAX_TIMEOUT_S)] = DEFAULT_TIMEOUT_S,
    stop_at_first: bool = False,
):
    """`POST /check/stream` for `EventSource`: the request as query parameters."""
    for name in request.query_params:
        if name not in QUERY_NAMES:
            raise fail(422, "query", name[:40], f"unknown query parameter {name[:40]!r}; "
                                                f"known: {', '.join(sorted(QUERY_NAMES))}")
    params = {"stages": stages, "tiles": tiles, "tile_bytes": tile_bytes,
              "chunk_bytes": chunk_bytes, "consumers": consumers}
    body = CheckRequest.model_construct(
        scenario=scenario, params=Params(**params),
        bugs=[b.strip() for b in bugs.split(",") if b.strip()], max_states=max_states,
        timeout_s=timeout_s, stop_at_first=stop_at_first)
    return _stream(await _Job(body, "query").ready(), address(request.scope))


def _stream(job: _Job, where: str):
    """Start the check in a worker now and stream what it reports; a client that goes away
    cancels it (the generator is closed, which cancels the task that awaits the worker)."""
    if not checks.free:
        raise Busy(f"{checks.running} check jobs are running or queued on this server; "
                   "try again soon")
    checks_held.take(where, settings.checks_per_address, max(1, round(job.timeout_s)))
    queue: asyncio.Queue = asyncio.Queue()

    async def work() -> None:
        try:
            result = await checks.run(*job.args(), **job.watched(),
                                      progress=lambda p: queue.put_nowait(("progress", p)))
            queue.put_nowait(("result", result))  # JSON text already
        except Busy as err:
            queue.put_nowait(("error", {"detail": str(err)}))
        except Exception as err:  # reported to the client, not swallowed
            queue.put_nowait(("error", {"detail": f"{type(err).__name__}: {err}"}))
        finally:
            checks_held.give(where)

    task = asyncio.ensure_future(work())
    return StreamingResponse(_events(queue, task), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _events(queue: asyncio.Queue, task: asyncio.Task):
    try:
        yield _event("progress", {"states_explored": 0, "transitions": 0, "depth": 0,
                                  "frontier": 1, "elapsed_s": 0.0, "found": {}})
        while True:
            kind, payload = await queue.get()
            yield _event(kind, payload)
            if kind != "progress":
                break
    finally:
        task.cancel()


def _event(kind: str, payload: dict | str) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"event: {kind}\ndata: {data}\n\n"

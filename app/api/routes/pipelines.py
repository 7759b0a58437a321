"""Pipelines given as text (docs/language.md): `POST /pipelines/validate` checks one and says
what it declares; `POST /traces` runs a pipeline text (or a built-in, by id) and answers the same
trace format as `GET /traces/{id}`.

Parsing a text and building its run are CPU work, so both go to the build pool, never the event
loop. Runs are keyed by the text itself (`RunKey.source`), so a worker process rebuilds one from
the key alone; a trace names its pipeline by `scenario.source_sha256`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from app.api.encode import json_response
from app.api.responses import errors
from app.api.runstore import TRACE_LIMIT, canonical_key, store
from app.api.sources import remember
from app.api.windows import window_answer, window_form, window_of
from app.api.work import builds
from app.core.clients import address
from app.lang.compiler import MAX_SOURCE_BYTES, instantiate, load, resolve_params
from app.scenarios import ParamError, from_source
from app.scenarios.schedules import MAX_SEED, parse_schedule

router = APIRouter(tags=["pipelines"])

STEP_LIMIT = TRACE_LIMIT
"""Where a posted pipeline's run stops (status `step_limit`); tests lower it."""

Name = Annotated[str, Field(max_length=80)]


class SourceBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str


class TraceBody(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    source: str | None = None
    scenario: Name | None = None
    params: Annotated[dict[Name, StrictInt], Field(max_length=64)] = {}
    bugs: Annotated[list[Name], Field(max_length=32)] = []
    schedule: Literal["round_robin", "random", "manual"] = "round_robin"
    seed: Annotated[StrictInt, Field(ge=0, le=MAX_SEED)] | None = None
    moves: Annotated[list[Annotated[str, Field(max_length=120)]], Field(max_length=10_000)] = []
    snapshots: StrictBool = True
    first: Annotated[StrictInt, Field(alias="from", ge=0, le=TRACE_LIMIT)] = 1
    last: Annotated[StrictInt | None, Field(alias="to", ge=0, le=TRACE_LIMIT)] = None


def check_size(source: str) -> None:
    """413 past the size limit, before any parsing."""
    if len(source.encode()) > MAX_SOURCE_BYTES:
        raise HTTPException(413, [{"loc": ["body", "source"], "type": "too_large",
                                   "msg": f"a pipeline source is at most {MAX_SOURCE_BYTES} "
                                          "bytes"}])


def describe_source(source: str) -> dict:
    """What a pipeline text declares, with its default parameters (runs in a build worker)."""
    scenario = from_source(source)
    pipeline = load(source)
    program = instantiate(pipeline, tuple(sorted(resolve_params(pipeline, {}).items())))
    return {
        "valid": True,
        "source_sha256": pipeline.sha256,
        "parameters": scenario.parameters,
        "toggles": pipeline.toggles(),
        "barriers": [{"name": b.name, "init_count": b.init_count} for b in program.barriers],
        "stages": [{"name": s.name, "bytes": s.bytes, "chunk_bytes": s.chunk_bytes}
                   for s in program.stages],
        "agents": [{"name": a.name, "role": a.role, "lines": len(a.listing)}
                   for a in program.agents],
    }


def source_key(source: str | None, scenario_id: str | None, params: dict, bugs, schedule,
               limit: int) -> object:
    """The run key of a body naming exactly one of `source` and `scenario`."""
    if (source is None) == (scenario_id is None):
        raise ParamError("source", "give either `source` (a pipeline text) or `scenario` "
                                   "(a built-in id), not both")
    return canonical_key(scenario_id, params, bugs, schedule, limit, source=source)


@router.post("/pipelines/validate", responses=errors(413, 422, 503))
async def validate(body: SourceBody):
    """What a pipeline text declares, with its default parameters; or a 422 whose `detail[0]`
    has the `line`, the `column` and what was expected."""
    check_size(body.source)
    return json_response(await builds.run(describe_source, body.source))


@router.post("/pipelines/sources", responses=errors(413, 422))
async def post_source(body: SourceBody) -> dict:
    """Teach this process a pipeline text (after a 409 `need_source` for a session id)."""
    check_size(body.source)
    return {"source_sha256": remember(body.source)}


@router.post("/traces", responses=errors(404, 413, 422, 503))
async def post_trace(body: TraceBody, request: Request):
    """The trace of a pipeline text (or of a built-in named by `scenario`), in the format of
    `GET /traces/{id}`; `scenario.source_sha256` names the text."""
    if body.source is not None:
        check_size(body.source)
    schedule = parse_schedule(body.schedule, body.seed, body.moves)
    key = await builds.run(source_key, body.source, body.scenario, body.params, body.bugs,
                           schedule, STEP_LIMIT)
    where = (address(request.scope),)
    entry = await store.get(key, clients=where)
    window = await window_of(entry, body.first, body.last, window_form(body.snapshots, False),
                             where, request.headers.get("accept-encoding", ""))
    return window_answer(request, window, None)

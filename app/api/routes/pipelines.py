"""Pipelines given as text (docs/language.md): `POST /pipelines/validate` checks one and says
what it declares; `POST /traces` runs a pipeline text (or a built-in, by id) and answers the same
trace format as `GET /traces/{id}`.

Sources are content-addressed: a trace names its pipeline by `scenario.source_sha256`, and the
parsed text is cached per process by its content, so posting the same text again costs nothing.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from app.api.encode import json_response
from app.api.routes.traces import trace_window
from app.api.runs import parse_schedule, runs, scenario_or_404
from app.lang.compiler import MAX_SOURCE_BYTES, instantiate, load, resolve_params
from app.scenarios import Scenario, from_source

router = APIRouter(tags=["pipelines"])

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
    seed: Annotated[StrictInt, Field(ge=0, le=2**63 - 1)] | None = None
    moves: Annotated[list[Annotated[str, Field(max_length=120)]], Field(max_length=10_000)] = []
    snapshots: StrictBool = True
    first: Annotated[StrictInt, Field(alias="from", ge=0)] = 1
    last: Annotated[StrictInt | None, Field(alias="to", ge=0)] = None


def source_scenario(source: str) -> Scenario:
    """A user's pipeline text as a scenario; 413 past the size limit, 422 (with line and
    column) when it does not compile."""
    if len(source.encode()) > MAX_SOURCE_BYTES:
        raise HTTPException(413, [{"loc": ["body", "source"], "type": "too_large",
                                   "msg": f"a pipeline source is at most {MAX_SOURCE_BYTES} "
                                          "bytes"}])
    return from_source(source)


def body_scenario(source: str | None, scenario_id: str | None) -> Scenario:
    """The scenario a body names: exactly one of `source` and `scenario`."""
    if (source is None) == (scenario_id is None):
        from app.scenarios import ParamError

        raise ParamError("source", "give either `source` (a pipeline text) or `scenario` "
                                   "(a built-in id), not both")
    return source_scenario(source) if source is not None else scenario_or_404(scenario_id)


@router.post("/pipelines/validate")
def validate(body: SourceBody) -> dict:
    """What a pipeline text declares, with its default parameters; or a 422 whose `detail[0]`
    has the `line`, the `column` and what was expected."""
    scenario = source_scenario(body.source)
    pipeline = load(body.source)
    values = resolve_params(pipeline, {})
    program = instantiate(pipeline, tuple(sorted(values.items())))
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


@router.post("/traces")
def post_trace(body: TraceBody):
    """The trace of a pipeline text (or of a built-in named by `scenario`), in the format of
    `GET /traces/{id}`; `scenario.source_sha256` names the text."""
    scenario = body_scenario(body.source, body.scenario)
    schedule = parse_schedule(body.schedule, body.seed, body.moves)
    run = runs.get(scenario, body.params, body.bugs, schedule)
    return json_response(trace_window(run, body.first, body.last, body.snapshots))

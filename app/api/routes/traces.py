"""Whole traces as JSON (docs/trace-format.md), with `from`/`to` windows for long runs."""

from __future__ import annotations

import inspect
import json
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from app.api.encode import compact_json, json_response
from app.api.runs import parse_schedule, runs, scenario_or_404
from app.core.config import settings
from app.export.perfetto import to_chrome_trace
from app.scenarios import PARAM_NAMES, ParamError

router = APIRouter(prefix="/traces", tags=["traces"])

QUERY_NAMES = set(PARAM_NAMES) | {"bugs", "schedule", "seed", "moves", "from", "to", "snapshots"}


@router.get("/{scenario_id}")
def get_trace(
    scenario_id: str,
    request: Request,
    stages: int | None = None,
    tiles: int | None = None,
    tile_bytes: int | None = None,
    chunk_bytes: int | None = None,
    consumers: int | None = None,
    bugs: Annotated[str, Query(max_length=400)] = "",
    schedule: str = "round_robin",
    seed: int | None = None,
    moves: Annotated[str, Query(max_length=200_000)] = "",
    first: Annotated[int, Query(alias="from", ge=0)] = 1,
    last: Annotated[int | None, Query(alias="to", ge=0)] = None,
    snapshots: bool = True,
) -> Response:
    """The trace of one run (docs/trace-format.md). Without `to`, as many steps as one response
    may hold."""
    scenario = scenario_or_404(scenario_id)
    for name in request.query_params:
        if name not in QUERY_NAMES:
            raise ParamError(name, f"unknown query parameter {name[:40]!r}; known: "
                                   f"{', '.join(sorted(QUERY_NAMES))}")
    params = {"stages": stages, "tiles": tiles, "tile_bytes": tile_bytes,
              "chunk_bytes": chunk_bytes, "consumers": consumers}
    run = runs.get(scenario, params, bugs, parse_schedule(schedule, seed, moves))
    return json_response(trace_window(run, first, last, snapshots))


def trace_window(run, first: int, last: int | None, snapshots: bool) -> dict:
    """The trace document of steps `first..last`; without `last`, as many steps as one response
    may hold. A window past the limit is a `ParamError` naming `to`."""
    window = settings.max_window if snapshots else settings.max_window * 10
    first = max(first, 1)
    if last is None:
        last = min(run.total_steps, first + window - 1)
    if last < first - 1:
        raise ParamError("to", f"to ({last}) is before from ({first})")
    if last - first + 1 > window:
        raise ParamError("to", f"a window holds at most {window} steps "
                               f"({'with' if snapshots else 'without'} snapshots); "
                               f"asked for {last - first + 1}")
    return run.document(first, last, snapshots)


def get_trace_perfetto(**query) -> Response:
    """The same run and window as `GET /traces/{scenario_id}`, from the same query (and with the
    same 422s naming the field), in the Chrome Trace Event Format that ui.perfetto.dev opens
    (docs/perfetto.md)."""
    doc = json.loads(get_trace(**query).body)
    return Response(compact_json(to_chrome_trace(doc)), media_type="application/json",
                    headers={"content-disposition":
                             f'attachment; filename="{doc["scenario"]["id"]}.perfetto.json"'})


# FastAPI reads the query from this signature: exactly `get_trace`'s, whatever it becomes.
get_trace_perfetto.__signature__ = inspect.signature(get_trace)
router.get("/{scenario_id}/perfetto")(get_trace_perfetto)

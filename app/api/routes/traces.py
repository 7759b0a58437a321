"""Whole traces as JSON (docs/trace-format.md), with `from`/`to` windows for long runs.

A window's `diagnostics` (unless it is the whole run) hold those inside it plus the run's first
one, and `diagnostics_total` counts all of them: a one-step window of a run with a million
diagnostics stays small. Windows are built, encoded and compressed in the window pool and kept
by content (app.api.windows), runs in the build pool.
"""

from __future__ import annotations

import inspect
import json
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from app.api.encode import IMMUTABLE, compact_json
from app.api.responses import errors
from app.api.runs import MAX_SEED, param_query, parse_schedule, scenario_or_404
from app.api.runstore import TRACE_LIMIT, canonical_key, store
from app.api.windows import Window, window_answer, window_form, window_of
from app.core.clients import address
from app.export.perfetto import to_chrome_trace
from app.scenarios import PARAM_NAMES, ParamError

router = APIRouter(prefix="/traces", tags=["traces"])

QUERY_NAMES = set(PARAM_NAMES) | {"bugs", "schedule", "seed", "moves", "from", "to", "snapshots",
                                  "patches"}


@router.get("/{scenario_id}", response_class=Response, responses=errors(404, 422, 503))
async def get_trace(
    scenario_id: str,
    request: Request,
    stages: param_query("stages") = None,
    tiles: param_query("tiles") = None,
    tile_bytes: param_query("tile_bytes") = None,
    chunk_bytes: param_query("chunk_bytes") = None,
    consumers: param_query("consumers") = None,
    bugs: Annotated[str, Query(max_length=400)] = "",
    schedule: Annotated[str, Query(max_length=40)] = "round_robin",
    seed: Annotated[int | None, Query(ge=0, le=MAX_SEED)] = None,
    moves: Annotated[str, Query(max_length=200_000)] = "",
    first: Annotated[int, Query(alias="from", ge=0, le=TRACE_LIMIT)] = 1,
    last: Annotated[int | None, Query(alias="to", ge=0, le=TRACE_LIMIT)] = None,
    snapshots: bool = True,
    patches: bool = False,
) -> Response:
    """The trace of one run (docs/trace-format.md). Without `to`, as many steps as one response
    may hold. `patches=true`: one full snapshot (`base`) and each step's `patch` in place of
    its `snapshot` (docs/trace-format.md, "Windows")."""
    window = await trace_window(**locals())  # every parameter, by name
    return window_answer(request, window, IMMUTABLE)


async def trace_window(scenario_id: str, request: Request, stages, tiles, tile_bytes,
                       chunk_bytes, consumers, bugs: str, schedule: str, seed: int | None,
                       moves: str, first: int, last: int | None, snapshots: bool,
                       patches: bool) -> Window:
    """The window `GET /traces/{scenario_id}` answers with."""
    scenario = scenario_or_404(scenario_id)
    for name in request.query_params:
        if name not in QUERY_NAMES:
            raise ParamError(name[:40], f"unknown query parameter {name[:40]!r}; known: "
                                        f"{', '.join(sorted(QUERY_NAMES))}")
    params = {"stages": stages, "tiles": tiles, "tile_bytes": tile_bytes,
              "chunk_bytes": chunk_bytes, "consumers": consumers}
    key = canonical_key(scenario.id, params, bugs, parse_schedule(schedule, seed, moves),
                        TRACE_LIMIT)
    form = window_form(snapshots, patches)
    where = (address(request.scope),)
    entry = await store.get(key, clients=where)
    return await window_of(entry, first, last, form, where)


async def get_trace_perfetto(**query) -> Response:
    """The same run and window as `GET /traces/{scenario_id}`, from the same query (and with the
    same 422s naming the field), in the Chrome Trace Event Format that ui.perfetto.dev opens
    (docs/perfetto.md)."""
    doc = json.loads((await trace_window(**query)).body)
    return Response(compact_json(to_chrome_trace(doc)), media_type="application/json",
                    headers={"content-disposition":
                             f'attachment; filename="{doc["scenario"]["id"]}.perfetto.json"',
                             "cache-control": IMMUTABLE})


# FastAPI reads the query from this signature: exactly `get_trace`'s, whatever it becomes.
get_trace_perfetto.__signature__ = inspect.signature(get_trace)
router.get("/{scenario_id}/perfetto", response_class=Response,
           responses=errors(404, 422, 503))(get_trace_perfetto)

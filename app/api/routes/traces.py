"""Whole traces as JSON (docs/trace-format.md), with `from`/`to` windows for long runs, and as
Perfetto files (docs/perfetto.md): `GET /traces/{id}/perfetto` takes the query of
`GET /traces/{id}`, `POST /traces/{id}/perfetto` the same query as a JSON body (`TraceQuery`), for
a manual schedule too long for a URL (`MBI_MAX_URL_BYTES`, 64 KiB).

A window's `diagnostics` (unless it is the whole run) hold those inside it plus the run's first
one, and `diagnostics_total` counts all of them: a one-step window of a run with a million
diagnostics stays small. Windows are built, encoded and compressed in the window pool and kept
by content (app.api.windows), runs in the build pool.
"""

from __future__ import annotations

import inspect
import json
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, create_model

from app.api.encode import IMMUTABLE, compact_json
from app.api.responses import errors
from app.api.runs import PARAM_RANGES, param_query, scenario_or_404
from app.api.runstore import TRACE_LIMIT, canonical_key, store
from app.api.windows import Window, window_answer, window_form, window_of
from app.core.clients import address
from app.export.perfetto import file_name, to_chrome_trace
from app.scenarios import PARAM_NAMES, ParamError
from app.scenarios.schedules import MAX_MANUAL_MOVES, MAX_SEED, parse_schedule

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
    k_blocks: param_query("k_blocks") = None,
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
                       chunk_bytes, consumers, k_blocks, bugs: str, schedule: str, seed: int | None,
                       moves: str, first: int, last: int | None, snapshots: bool,
                       patches: bool) -> Window:
    """The window `GET /traces/{scenario_id}` answers with."""
    scenario_or_404(scenario_id)
    for name in request.query_params:
        if name not in QUERY_NAMES:
            raise ParamError(name[:40], f"unknown query parameter {name[:40]!r}; known: "
                                        f"{', '.join(sorted(QUERY_NAMES))}")
    params = {"stages": stages, "tiles": tiles, "tile_bytes": tile_bytes,
              "chunk_bytes": chunk_bytes, "consumers": consumers, "k_blocks": k_blocks}
    return await run_window(scenario_id, request, params, bugs,
                            parse_schedule(schedule, seed, moves), first, last,
                            window_form(snapshots, patches))


async def run_window(scenario_id: str, request: Request, params: dict, bugs, schedule,
                     first: int, last: int | None, form) -> Window:
    """One run's window, whichever form of the query asked for it."""
    key = canonical_key(scenario_id, params, bugs, schedule, TRACE_LIMIT)
    where = (address(request.scope),)
    entry = await store.get(key, clients=where)
    return await window_of(entry, first, last, form, where,
                           request.headers.get("accept-encoding", ""))


async def get_trace_perfetto(**query) -> Response:
    """The same run and window as `GET /traces/{scenario_id}`, from the same query (and with the
    same 422s naming the field), in the Chrome Trace Event Format that ui.perfetto.dev opens
    (docs/perfetto.md)."""
    return perfetto_response(await trace_window(**query))


def perfetto_response(window: Window) -> Response:
    """A trace window as its Perfetto file, named after the run."""
    doc = json.loads(window.body)
    return Response(compact_json(to_chrome_trace(doc)), media_type="application/json",
                    headers={"content-disposition": f'attachment; filename="{file_name(doc)}"',
                             "cache-control": IMMUTABLE})


# FastAPI reads the query from this signature: exactly `get_trace`'s, whatever it becomes.
get_trace_perfetto.__signature__ = inspect.signature(get_trace)
router.get("/{scenario_id}/perfetto", response_class=Response,
           responses=errors(404, 422, 503))(get_trace_perfetto)


Name = Annotated[str, Field(max_length=80)]


class _TraceQueryFields(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    bugs: Annotated[list[Name], Field(max_length=32)] = []
    schedule: Literal["round_robin", "random", "manual"] = "round_robin"
    seed: Annotated[StrictInt, Field(ge=0, le=MAX_SEED)] | None = None
    moves: Annotated[list[Annotated[str, Field(max_length=120)]],
                     Field(max_length=MAX_MANUAL_MOVES)] = []
    first: Annotated[StrictInt, Field(alias="from", ge=0, le=TRACE_LIMIT)] = 1
    last: Annotated[StrictInt | None, Field(alias="to", ge=0, le=TRACE_LIMIT)] = None
    snapshots: StrictBool = True
    patches: StrictBool = False


TraceQuery = create_model(
    "TraceQuery", __base__=_TraceQueryFields,
    **{name: (Annotated[StrictInt, Field(ge=PARAM_RANGES[name][0], le=PARAM_RANGES[name][1])]
              | None, None) for name in PARAM_NAMES})
"""`GET /traces/{id}`'s query as a JSON body: the same names, `bugs` and `moves` as lists."""


@router.post("/{scenario_id}/perfetto", response_class=Response,
             responses=errors(404, 422, 503))
async def post_trace_perfetto(scenario_id: str, body: TraceQuery, request: Request) -> Response:
    """`GET /traces/{scenario_id}/perfetto` with its query as a JSON body (`moves` a list): a
    manual schedule of thousands of moves does not fit a URL. Errors name the body's field."""
    scenario_or_404(scenario_id)
    params = {name: getattr(body, name) for name in PARAM_NAMES}
    schedule = parse_schedule(body.schedule, body.seed, body.moves)
    return perfetto_response(await run_window(scenario_id, request, params, body.bugs,
                                              schedule, body.first, body.last,
                                              window_form(body.snapshots, body.patches)))

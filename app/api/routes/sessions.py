"""Sessions: a student (or an API client) stepping through one run, forward, back, or by naming the
agent that moves next; a WebSocket that plays it (app.api.stream); SSE for read-only clients
(app.api.sse).

A session is a *value*, not a stored object: its id (app.api.token) is the run key and the cursor,
signed, so any worker process or host rebuilds the session from the id alone. Every answer carries
the id of the new state; old ids stay valid until they have been idle for `settings.
session_idle_s`. Runs come from the one run store (app.api.runstore), built in worker processes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response, WebSocket
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from app.api import sse, stream
from app.api.encode import PRIVATE_IMMUTABLE
from app.api.errors import fail
from app.api.responses import JSON_ONLY, SESSION_ERRORS, errors
from app.api.routes.pipelines import check_size
from app.api.runs import params_dict
from app.api.runstore import SESSION_STEP_LIMIT, canonical_key, store
from app.api.session import (
    answer,
    clamp_step,
    clients_of,
    open_token,
    step_session,
    view,
)
from app.api.token import (
    MAX_PICKS,
    MAX_TOKEN_CHARS,
    RunSpec,
    Seed,
    SessionToken,
    new_client,
)
from app.api.windows import window_form, window_response
from app.api.work import builds
from app.core.clients import address
from app.core.config import settings
from app.scenarios import ParamError
from app.scenarios.schedules import parse_schedule

router = APIRouter(prefix="/sessions", tags=["sessions"])

MoverName = Annotated[str, Field(min_length=1, max_length=80)]
Step = Annotated[StrictInt, Field(ge=0, le=SESSION_STEP_LIMIT)]


class Pick(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: Annotated[StrictInt, Field(ge=1, le=SESSION_STEP_LIMIT)]
    agent: MoverName


class ScheduleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Annotated[str, Field(max_length=40)] = "round_robin"
    seed: Seed | None = None
    moves: Annotated[list[MoverName], Field(max_length=MAX_PICKS)] = []


class SessionCreate(RunSpec):
    """`POST /sessions`: the scenario, its parameters and bug toggles, the schedule, and where
    to start (`step`, and `picks` or a manual schedule's `moves` from a permalink). A session id
    is decoded with the same `RunSpec` fields."""

    bugs: Annotated[list[Annotated[str, Field(min_length=1, max_length=60)]],
                    Field(max_length=16)] | Annotated[str, Field(max_length=1000)] = []
    schedule: Annotated[str, Field(max_length=40)] | ScheduleIn = "round_robin"
    moves: Annotated[list[MoverName], Field(max_length=MAX_PICKS)] = []
    """A manual schedule's movers in order (as GET /traces takes them): picks at steps 1, 2..."""
    picks: Annotated[list[Pick], Field(max_length=MAX_PICKS)] = []
    step: Step = 0
    source: str | None = None
    """A pipeline text (docs/language.md) in place of `scenario`: the session id carries its
    sha256, and a process that lacks the text answers 409 `{"need_source": sha256}`."""


class StepIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent: MoverName | None = None
    """Who moves: an agent (`producer`, `consumer0`), `tma` (the oldest copy in flight),
    `tma:<op>` (e.g. `tma:load:t1`) or `tensor_core`. Absent: the schedule chooses."""


class SeekIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: Step


SessionId = Annotated[str, Path(max_length=MAX_TOKEN_CHARS)]


@router.post("", status_code=201, response_class=Response,
             responses=errors(422, 503, ok=201, ok_body="a session view"))
async def create_session(body: SessionCreate, request: Request) -> Response:
    """A new session at `step` (0 by default), with its layout and the run's diagnostics."""
    schedule_in = body.schedule
    if isinstance(schedule_in, str):
        schedule_in = ScheduleIn(kind=schedule_in, seed=body.seed, moves=body.moves)
    schedule = parse_schedule(schedule_in.kind, schedule_in.seed)
    bugs = ",".join(body.bugs) if isinstance(body.bugs, list) else body.bugs
    if body.source is not None or body.source_sha256 is not None:
        if body.source is None or body.scenario is not None:
            raise ParamError("source", "give either `scenario` (a built-in id) or `source` "
                                       "(a pipeline text)")
        check_size(body.source)
        key = await builds.run(canonical_key, None, params_dict(body.params), bugs, schedule,
                               SESSION_STEP_LIMIT, "source", body.source)
    elif body.scenario is None:
        raise ParamError("scenario", "give either `scenario` (a built-in id) or `source` "
                                     "(a pipeline text)")
    else:
        key = canonical_key(body.scenario, params_dict(body.params), bugs, schedule)
    named = [(p.step, p.agent) for p in body.picks]
    moves = schedule_in.moves or body.moves
    if moves:
        if schedule.kind != "manual":
            raise ParamError("moves", "moves are a manual schedule's; use picks with "
                                      f"{schedule.kind}")
        if named:
            raise ParamError("picks", "give either moves or picks, not both")
        named = [(i + 1, name) for i, name in enumerate(moves)]
    client = new_client()
    entry = await store.get(key, named or None,
                            clients=(address(request.scope), f"s:{client}"))
    token = SessionToken(entry.key, clamp_step(body.step, entry), client)
    return answer(view(token, entry, layout=True), 201)


@router.get("/{session_id}", response_class=Response, responses=SESSION_ERRORS)
async def get_session(session_id: SessionId) -> Response:
    token, entry = await open_token(session_id)
    return answer(view(token, entry, layout=True))


@router.post("/{session_id}/step", response_class=Response,
             responses=errors(404, 409, 410, 415, 422, 503, ok_body="a session view"),
             openapi_extra={
                 "parameters": [{"name": "session_id", "in": "path", "required": True,
                                 "schema": {"type": "string", "maxLength": MAX_TOKEN_CHARS}}],
                 "requestBody": {"required": False, "content": {
                     "application/json": {"schema": StepIn.model_json_schema()}}}})
async def step(request: Request) -> Response:
    """One step forward; `{"agent": name}` names who moves. Naming a blocked agent is a 409 that
    says what it waits on. (Path and body are read by hand: this is the hot path.)"""
    token, entry = await open_token(request.path_params["session_id"])
    raw = await request.body()
    agent = None
    if raw.strip():
        try:
            agent = StepIn.model_validate_json(raw).agent
        except ValidationError as err:
            first = err.errors()[0]
            loc = [str(part) for part in first["loc"]] or ["body"]
            raise fail(422, "body", loc[-1], first["msg"]) from None
    token, entry = await step_session(token, agent, entry)
    return answer(view(token, entry))


@router.post("/{session_id}/back", response_class=Response,
             responses=errors(404, 409, 410, 415, 422, 503, ok_body="a session view"))
async def back(session_id: SessionId) -> Response:
    """One step back: the same run, the cursor one earlier (the picks are kept)."""
    token, entry = await open_token(session_id)
    if token.step == 0:
        raise fail(409, "body", "step", "already at step 0")
    return answer(view(replace(token, step=token.step - 1), entry))


@router.post("/{session_id}/seek", response_class=Response, responses=SESSION_ERRORS | JSON_ONLY)
async def seek(session_id: SessionId, body: SeekIn) -> Response:
    token, entry = await open_token(session_id)
    return answer(view(replace(token, step=clamp_step(body.step, entry)), entry))


@router.post("/{session_id}/reset", response_class=Response,
             responses=errors(404, 410, 415, 422, 503, ok_body="a session view"))
async def reset(session_id: SessionId) -> Response:
    """Step 0 of the schedule's own run: the picks are forgotten."""
    token, _ = await open_token(session_id)
    key = replace(token.key, picks=())
    return answer(view(replace(token, key=key, step=0),
                       await store.get(key, clients=clients_of(token)), layout=True))


@router.get("/{session_id}/snapshots/{step}", response_class=Response,
            responses=SESSION_ERRORS)
async def snapshot(session_id: SessionId, step: Annotated[int, Path(ge=0, le=SESSION_STEP_LIMIT)]
                   ) -> Response:
    """The state after any step of the session's run, without moving its cursor."""
    token, entry = await open_token(session_id)
    record, snap, ready = entry.frame(clamp_step(step, entry, "path"))
    response = answer({"step": step, "record": record, "snapshot": snap, "ready": ready})
    response.headers["cache-control"] = PRIVATE_IMMUTABLE
    return response


@router.get("/{session_id}/trace", response_class=Response, responses=SESSION_ERRORS)
async def trace(session_id: SessionId, request: Request,
                first: Annotated[int, Query(alias="from", ge=0, le=SESSION_STEP_LIMIT)] = 1,
                last: Annotated[int | None, Query(alias="to", ge=0,
                                                  le=SESSION_STEP_LIMIT)] = None,
                snapshots: bool = True, patches: bool = False) -> Response:
    """The session's whole run as a trace document (docs/trace-format.md), in windows;
    `patches=true`: one full snapshot (`base`) and each step's `patch` in place of its
    `snapshot`, as the browser's player asks (docs/trace-format.md, "Windows"). A window is
    fixed by the run, not the cursor: every id of the run shares it (ETag, immutable)."""
    form = window_form(snapshots, patches)
    token, entry = await open_token(session_id)
    clients = clients_of(token) or (address(request.scope),)  # the session, else its address
    return await window_response(request, entry, first, last, form, PRIVATE_IMMUTABLE, clients)


@router.websocket("/{session_id}/ws")
async def play_socket(websocket: WebSocket, session_id: str) -> None:
    """See `app.api.stream.play_socket`."""
    await stream.play_socket(websocket, session_id)


@router.get("/{session_id}/events", response_class=StreamingResponse,
            responses=errors(404, 410, 422, 503, ok_body="text/event-stream", ok_type="sse"))
async def events(session_id: SessionId, request: Request,
                 steps_per_s: Annotated[float, Query(ge=stream.MIN_SPEED,
                                                     le=stream.MAX_SPEED)] = 10.0,
                 first: Annotated[int | None, Query(alias="from", ge=0,
                                                    le=SESSION_STEP_LIMIT)] = None,
                 ) -> StreamingResponse:
    """Server-sent events for read-only clients: one `state` event per step from the session's
    step (or `from`) to the end, then `end`; `Last-Event-ID` resumes after that step."""
    token, entry = await open_token(session_id)
    return sse.event_stream(request, token, entry, first, steps_per_s)


__all__ = ["router", "settings"]

"""Sessions: a student (or an API client) stepping through one run, forward, back, or by naming the
agent that moves next; a WebSocket that plays it; an SSE stream for read-only clients.

A session is a *value*, not a stored object: (scenario, params, bugs, schedule, picks, step), where
a *pick* is a step at which the caller named the mover instead of letting the schedule choose. The
session id is that value, compact and checksummed (`SessionToken`), so any worker process or host
rebuilds the session from the id alone: no sticky sessions, no shared store. Every answer carries
the id of the new state; old ids stay valid until they have been idle for `settings.session_idle_s`.

Runs are pure functions of (scenario, params, bugs, schedule, picks), so the per-process `RunStore`
only saves time; it is bounded in entries and in steps and drops idle runs. Work that may be long
(building a run) goes to a worker thread; one step of an already built run is microseconds and runs
on the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import itertools
import json
import os
import secrets
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Annotated

from fastapi import (
    APIRouter,
    HTTPException,
    Path,
    Query,
    Request,
    Response,
    WebSocket,
    WebSocketDisconnect,
)
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.api.runs import parse_schedule
from app.core.config import settings
from app.scenarios import ParamError, Scenario
from app.scenarios import get as get_scenario
from app.sim.machine import Machine, MoveError
from app.sim.schedule import Schedule
from app.sim.trace import CHECKPOINT_EVERY, Run

WORKER = secrets.token_hex(4)
"""This process's name in the `X-Worker` header: shows which worker answered (tests, ops)."""

router = APIRouter(prefix="/sessions", tags=["sessions"])

SESSION_STEP_LIMIT = 100_000
"""A session's run stops here (status `step_limit`); GET /traces serves longer runs in windows."""
MAX_PICKS = 4_000
"""Steps at which a caller may name the mover: they travel inside the session id."""
MAX_TOKEN_CHARS = 16_000
MAX_SPEED = 240.0
"""Steps per second a stream may play at."""
CACHED_STEPS = 4_000_000
"""Steps kept by all cached runs of a process together (about 1 byte each plus checkpoints)."""
POSITIONS_PER_RUN = 64
"""Machine states kept per run near where clients stand, so a step costs one move, not 255."""
SESSION_KEY = os.environ.get("MBI_SESSION_KEY", "mbarrier-inspector").encode()
"""Keys the session-id checksum. It detects damaged ids; it grants nothing, as every field of an id
is validated again when it is read."""


def answer(payload: dict | str, status: int = 200) -> Response:
    """A JSON response encoded once by `json.dumps` (or given as JSON text): FastAPI's generic
    encoder would walk the snapshot again and cost several times what the step itself does."""
    text = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return Response(text.encode(), status, headers={"x-worker": WORKER},
                    media_type="application/json")


def fail(status: int, location: str, field: str, message: str) -> HTTPException:
    """An HTTP error in the API's 422 shape, naming the field that was wrong."""
    return HTTPException(status, [{"loc": [location, field], "msg": message,
                                   "type": "value_error"}])


# ------------------------------------------------------------------------------ session value

@dataclass(frozen=True, slots=True)
class RunKey:
    """What fixes a session's run: the configuration, the schedule and the picks."""

    scenario: str
    params: tuple[tuple[str, int], ...]
    bugs: tuple[str, ...]
    schedule: Schedule
    picks: tuple[tuple[int, int], ...] = ()
    """(step, move number): at `step` the named mover moved instead of the schedule's choice."""


@dataclass(frozen=True, slots=True)
class SessionToken:
    """A session id: a run key and a cursor. `encode` stamps the time, for idle expiry."""

    key: RunKey
    step: int

    def encode(self, now: float | None = None) -> str:
        key = self.key
        flat = [n for pick in key.picks for n in pick]
        issued = int(time.time() if now is None else now)
        payload = json.dumps(
            [1, key.scenario, dict(key.params), list(key.bugs), key.schedule.kind,
             key.schedule.seed, flat, self.step, issued],
            separators=(",", ":")).encode()
        if len(payload) > 160:
            payload = b"z" + zlib.compress(payload, 6)
        text = f"{_b64(payload)}.{_b64(_mac(payload))}"
        _issued[text] = (self, issued)
        if len(_issued) > ISSUED_KEPT:
            _issued.popitem(last=False)
        return text

    @classmethod
    def decode(cls, text: str) -> SessionToken:
        """The token `encode` wrote; a damaged id is a 404, an idle one a 410."""
        unknown = fail(404, "path", "session_id", "unknown session: the id is damaged or was not "
                                                  "issued by this server; create a new session")
        if len(text) > MAX_TOKEN_CHARS:
            raise fail(422, "path", "session_id", f"a session id has at most {MAX_TOKEN_CHARS} "
                                                  "characters")
        known = _issued.get(text)
        if known is not None:  # an id this process issued: no need to parse and check it again
            token, issued = known
            if time.time() - issued <= settings.session_idle_s:
                return token
        if text.count(".") != 1:
            raise unknown
        body, mac = text.split(".")
        try:
            payload = _unb64(body)
            if _b64(_mac(payload)) != mac:
                raise unknown
            if payload[:1] == b"z":
                payload = zlib.decompressobj().decompress(payload[1:], 1 << 20)
            (version, scenario, params, bugs, kind, seed, flat, step, issued) = json.loads(payload)
            idle = time.time() - issued
            picks = tuple((int(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2))
            key = RunKey(str(scenario), tuple(sorted(params.items())), tuple(bugs),
                         parse_schedule(kind, seed), picks)
        except (ValueError, binascii.Error, zlib.error, TypeError, AttributeError, IndexError):
            raise unknown from None
        if version != 1 or not isinstance(step, int) or step < 0:
            raise unknown
        if idle > settings.session_idle_s:
            raise fail(410, "path", "session_id",
                       f"session expired: idle for more than {settings.session_idle_s} s; "
                       "create a new one (a permalink recreates it)")
        return cls(key, step)


ISSUED_KEPT = 8192
_issued: OrderedDict[str, tuple[SessionToken, int]] = OrderedDict()
"""Ids this process issued lately, already parsed: the next request usually brings one back."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, key=SESSION_KEY, digest_size=9).digest()


# -------------------------------------------------------------------------------- run store

def build_run(key: RunKey, named: list[tuple[int, str]] | None = None) -> tuple[Run, RunKey]:
    """The run of `key`: the schedule's choices, except at each pick. Slow for long runs: call it
    in a worker thread. `named` are picks by mover name (from a permalink), validated one by one
    and returned in `key.picks` as move numbers; `ParamError` names the bad one."""
    scenario = _scenario(key.scenario, "session_id")
    cfg = scenario.resolve(dict(key.params), key.bugs)
    run = Run(cfg, key.schedule, scenario.describe(cfg), step_limit=SESSION_STEP_LIMIT)
    chooser = key.schedule.chooser()
    picks = list(key.picks)
    field = "session_id"
    if named is not None:
        picks, field = named, "picks"
    resolved = []
    for i, (step, mover) in enumerate(picks):
        where = f"pick {i + 1} (step {step})"
        if step <= run.total_steps:
            raise ParamError(field, f"{where}: picks must name increasing steps, from 1")
        run.extend(chooser, step - 1 - run.total_steps)
        if run.total_steps != step - 1:
            raise ParamError(field, f"{where}: the run stops at step {run.total_steps} "
                                    f"({run.status})")
        machine = run.machine
        try:
            move = machine.resolve(mover) if isinstance(mover, str) else mover
        except MoveError as err:
            raise ParamError(field, f"{where}: {err}") from None
        if move not in machine.ready:
            raise ParamError(field, f"{where}: {machine.why_not(move)}")
        run.append(move)
        resolved.append((step, move))
    try:
        run.extend(chooser, SESSION_STEP_LIMIT)
    except MoveError as err:  # a manual schedule's list of moves, from the traces API spelling
        raise ParamError("moves", str(err)) from None
    return run, replace(key, picks=tuple(resolved))


FRAMES_KEPT = 8192
_frames: OrderedDict[tuple[int, int], str] = OrderedDict()
"""Encoded frames of every run, oldest first (about 2 KB each): bounded, shared by clients."""
_serials = itertools.count()


class Entry:
    """One built run and a few machine states near where its clients stand."""

    __slots__ = ("run", "positions", "scratch", "used", "serial")

    def __init__(self, run: Run):
        self.run = run
        self.serial = next(_serials)
        self.positions: OrderedDict[int, tuple] = OrderedDict()
        self.scratch = Machine(run.cfg)
        self.used = time.monotonic()

    def machine_at(self, step: int, machine: Machine | None = None) -> Machine:
        """A machine after `step` moves, from the nearest kept state (at most 255 moves away)."""
        run = self.run
        machine = machine or self.scratch
        base = step // CHECKPOINT_EVERY * CHECKPOINT_EVERY
        start, frozen = base, run.checkpoints[step // CHECKPOINT_EVERY]
        for near in (step, step - 1):
            kept = self.positions.get(near)
            if kept is not None and near >= base:
                start, frozen = near, kept
                break
        machine.thaw(frozen, start)
        for move in run.choices[start:step]:
            machine.step(move)
        return machine

    def frame(self, step: int) -> tuple[dict | None, dict, list[str]]:
        """(the step record of `step` or None at 0, the snapshot after it, the movers ready)."""
        run = self.run
        if step == 0:
            machine = self.machine_at(0)
            record = None
        else:
            machine = self.machine_at(step - 1)
            record = machine.step(run.choices[step - 1])
            self.remember(step, machine)
        return record, machine.snapshot(), ready_names(machine)

    def frame_json(self, step: int) -> str:
        """The frame at `step` as JSON (`step`, `total_steps`, `status`, `ready`, `record`,
        `snapshot`), encoded once and shared by every client standing there."""
        key = (self.serial, step)
        text = _frames.get(key)
        if text is None:
            record, snapshot, ready = self.frame(step)
            run = self.run
            text = json.dumps({"step": step, "total_steps": run.total_steps, "status": run.status,
                               "ready": ready, "record": record, "snapshot": snapshot},
                              separators=(",", ":"))
            _frames[key] = text
            if len(_frames) > FRAMES_KEPT:
                _frames.popitem(last=False)
        return text

    def remember(self, step: int, machine: Machine) -> None:
        positions = self.positions
        positions[step] = machine.freeze()
        positions.move_to_end(step)
        if len(positions) > POSITIONS_PER_RUN:
            positions.popitem(last=False)


def ready_names(machine: Machine) -> list[str]:
    names = machine.moves()
    return [names[m] for m in machine.ready]


def mover_name(record: dict) -> str:
    """The name that moves the same mover again: an agent, `tensor_core` or `tma:<op>`."""
    if record["agent"] == "tma":
        return f"tma:{record['operands']['op']}"
    return record["agent"]


class RunStore:
    """Built runs of this process by key: least recently used first, bounded, idle ones dropped.

    Only the event loop's thread touches it; building happens in worker threads.
    """

    def __init__(self) -> None:
        self.entries: OrderedDict[RunKey, Entry] = OrderedDict()
        self.steps = 0

    def peek(self, key: RunKey) -> Entry | None:
        entry = self.entries.get(key)
        if entry is not None:
            entry.used = time.monotonic()
            self.entries.move_to_end(key)
        return entry

    async def get(self, key: RunKey) -> Entry:
        entry = self.peek(key)
        if entry is None:
            run, key = await run_in_threadpool(build_run, key)
            entry = self.put(key, run)
        return entry

    def put(self, key: RunKey, run: Run) -> Entry:
        old = self.entries.get(key)
        if old is not None:
            return old
        entry = self.entries[key] = Entry(run)
        self.steps += run.total_steps
        self.evict()
        return entry

    def evict(self) -> None:
        idle_before = time.monotonic() - settings.session_idle_s
        entries = self.entries
        while entries and (len(entries) > settings.max_sessions or self.steps > CACHED_STEPS
                           or next(iter(entries.values())).used < idle_before):
            _, entry = entries.popitem(last=False)
            self.steps -= entry.run.total_steps
            if len(entries) == 0:
                break


store = RunStore()


def _scenario(scenario_id: str, field: str) -> Scenario:
    try:
        return get_scenario(scenario_id)
    except KeyError:
        raise ParamError(field, f"no scenario {str(scenario_id)[:80]!r}") from None


# ------------------------------------------------------------------------------------ views

def view(token: SessionToken, entry: Entry, *, layout: bool = False) -> str:
    """A session as the API answers it (JSON text): where the cursor is, what just happened,
    who may move; with `layout`, also the layout, the run's diagnostics and the picks."""
    run = entry.run
    head = {"id": token.encode(), "scenario": scenario_block(token.key, run)}
    if layout:
        head["layout"] = run.machine_at(0).layout()
        head["diagnostics"] = run.diagnostics
        head["picks"] = picks_by_name(entry, token.key)
    return (json.dumps(head, separators=(",", ":"))[:-1] + ","
            + entry.frame_json(token.step)[1:])


def scenario_block(key: RunKey, run: Run) -> dict:
    return {**run.scenario, "schedule": key.schedule.as_dict()}


def picks_by_name(entry: Entry, key: RunKey) -> list[dict]:
    """The picks as `{"step", "agent"}` with mover names, as a permalink spells them."""
    if not key.picks:
        return []
    records = {}
    first = key.picks[0][0]
    for record in entry.run.steps(first, key.picks[-1][0], snapshots=False):
        records[record["step"]] = record
    return [{"step": step, "agent": mover_name(records[step])} for step, _ in key.picks]


def document(token: SessionToken, entry: Entry, first: int, last: int | None,
             snapshots: bool) -> dict:
    doc = entry.run.document(first, last, snapshots)
    doc["scenario"]["schedule"] = token.key.schedule.as_dict()
    if token.key.picks:
        doc["scenario"]["schedule"]["picks"] = picks_by_name(entry, token.key)
    return doc


# ---------------------------------------------------------------------------- cursor moves

async def step_session(token: SessionToken, agent: str | None,
                       entry: Entry | None = None) -> tuple[SessionToken, Entry]:
    """One step forward: the run's next move, or the named mover (a pick that may fork the run)."""
    entry = entry or await store.get(token.key)
    run, step = entry.run, token.step
    if agent is None:
        if step < run.total_steps:
            return replace(token, step=step + 1), entry
        if run.status == "running" and token.key.schedule.kind == "manual":
            ready = ", ".join(ready_names(entry.machine_at(step))) or "none"
            raise fail(409, "body", "agent", "a manual schedule moves only the movers you name; "
                                             f"ready now: {ready}")
        raise fail(409, "body", "step", f"the run has ended at step {step} ({run.status})")
    machine = entry.machine_at(step)
    try:
        move = machine.resolve(agent)
    except MoveError as err:
        raise ParamError("agent", str(err)) from None
    if move not in machine.ready:
        raise MoveError(machine.why_not(move))
    if step < run.total_steps and run.choices[step] == move:
        return replace(token, step=step + 1), entry
    picks = tuple(p for p in token.key.picks if p[0] <= step) + ((step + 1, move),)
    if len(picks) > MAX_PICKS:
        raise fail(409, "body", "agent", f"a session holds at most {MAX_PICKS} picks; let the "
                                         "schedule choose (step without naming an agent)")
    key = replace(token.key, picks=picks)
    return SessionToken(key, step + 1), await store.get(key)


def clamp_step(step: int, entry: Entry, location: str = "body") -> int:
    total = entry.run.total_steps
    if not 0 <= step <= total:
        raise fail(422, location, "step", f"step must be in 0..{total}; got {str(step)[:24]}")
    return step


async def open_token(session_id: str) -> tuple[SessionToken, Entry]:
    token = SessionToken.decode(session_id)
    try:
        entry = await store.get(token.key)
    except ParamError as err:
        raise fail(404, "path", "session_id", f"unknown session: {err.message}") from None
    if token.step > entry.run.total_steps:
        raise fail(404, "path", "session_id", "unknown session: its step is past its run's end")
    return token, entry


# ------------------------------------------------------------------------------- REST routes

class Pick(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: Annotated[int, Field(ge=1, le=SESSION_STEP_LIMIT)]
    agent: Annotated[str, Field(min_length=1, max_length=80)]


class ScheduleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Annotated[str, Field(max_length=40)] = "round_robin"
    seed: int | None = None
    moves: Annotated[list[Annotated[str, Field(max_length=80)]], Field(max_length=MAX_PICKS)] = []


class SessionCreate(BaseModel):
    """`POST /sessions`: the scenario, its parameters and bug toggles, the schedule, and where
    to start (`step`, and `picks` or a manual schedule's `moves` from a permalink)."""

    model_config = ConfigDict(extra="forbid")
    scenario: Annotated[str, Field(min_length=1, max_length=80)]
    params: Annotated[dict[str, int | None], Field(max_length=8)] = {}
    bugs: Annotated[list[Annotated[str, Field(max_length=60)]], Field(max_length=16)] | str = []
    schedule: Annotated[str, Field(max_length=40)] | ScheduleIn = "round_robin"
    seed: int | None = None
    moves: Annotated[list[Annotated[str, Field(max_length=80)]], Field(max_length=MAX_PICKS)] = []
    """A manual schedule's movers in order (as GET /traces takes them): picks at steps 1, 2..."""
    picks: Annotated[list[Pick], Field(max_length=MAX_PICKS)] = []
    step: Annotated[int, Field(ge=0, le=SESSION_STEP_LIMIT)] = 0


class StepIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent: Annotated[str, Field(min_length=1, max_length=80)] | None = None
    """Who moves: an agent (`producer`, `consumer0`), `tma` (the oldest copy in flight),
    `tma:<op>` (e.g. `tma:load:t1`) or `tensor_core`. Absent: the schedule chooses."""


class SeekIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: Annotated[int, Field(ge=0, le=SESSION_STEP_LIMIT)]


SessionId = Annotated[str, Path(max_length=MAX_TOKEN_CHARS)]


def _bugs_text(bugs: list[str] | str) -> str:
    return ",".join(bugs) if isinstance(bugs, list) else bugs


@router.post("", status_code=201, response_class=Response)
async def create_session(body: SessionCreate) -> Response:
    """A new session at `step` (0 by default), with its layout and the run's diagnostics."""
    scenario = _scenario(body.scenario, "scenario")
    schedule_in = body.schedule
    if isinstance(schedule_in, str):
        schedule_in = ScheduleIn(kind=schedule_in, seed=body.seed, moves=body.moves)
    schedule = parse_schedule(schedule_in.kind, schedule_in.seed)
    cfg = scenario.resolve(body.params, _bugs_text(body.bugs))
    described = scenario.describe(cfg)
    named = [(p.step, p.agent) for p in body.picks]
    moves = schedule_in.moves or body.moves
    if moves:
        if schedule.kind != "manual":
            raise ParamError("moves", "moves are a manual schedule's; use picks with "
                                      f"{schedule.kind}")
        if named:
            raise ParamError("picks", "give either moves or picks, not both")
        named = [(i + 1, name) for i, name in enumerate(moves)]
    key = RunKey(scenario.id, tuple(sorted(described["params"].items())),
                 tuple(described["bugs"]), schedule)
    entry = store.peek(key) if not named else None
    if entry is None:
        run, key = await run_in_threadpool(build_run, key, named)
        entry = store.put(key, run)
    token = SessionToken(key, clamp_step(body.step, entry))
    return answer(view(token, entry, layout=True), 201)


@router.get("/{session_id}", response_class=Response)
async def get_session(session_id: SessionId) -> Response:
    token, entry = await open_token(session_id)
    return answer(view(token, entry, layout=True))


@router.post("/{session_id}/step", response_class=Response,
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


@router.post("/{session_id}/back", response_class=Response)
async def back(session_id: SessionId) -> Response:
    """One step back: the same run, the cursor one earlier (the picks are kept)."""
    token, entry = await open_token(session_id)
    if token.step == 0:
        raise fail(409, "body", "step", "already at step 0")
    return answer(view(replace(token, step=token.step - 1), entry))


@router.post("/{session_id}/seek", response_class=Response)
async def seek(session_id: SessionId, body: SeekIn) -> Response:
    token, entry = await open_token(session_id)
    return answer(view(replace(token, step=clamp_step(body.step, entry)), entry))


@router.post("/{session_id}/reset", response_class=Response)
async def reset(session_id: SessionId) -> Response:
    """Step 0 of the schedule's own run: the picks are forgotten."""
    token, _ = await open_token(session_id)
    key = replace(token.key, picks=())
    return answer(view(SessionToken(key, 0), await store.get(key), layout=True))


@router.get("/{session_id}/snapshots/{step}", response_class=Response)
async def snapshot(session_id: SessionId,
                   step: Annotated[int, Path(ge=0, le=SESSION_STEP_LIMIT)]) -> Response:
    """The state after any step of the session's run, without moving its cursor."""
    token, entry = await open_token(session_id)
    record, snap, ready = entry.frame(clamp_step(step, entry, "path"))
    return answer({"step": step, "record": record, "snapshot": snap, "ready": ready})


@router.get("/{session_id}/trace", response_class=Response)
async def trace(session_id: SessionId,
                first: Annotated[int, Query(alias="from", ge=0, le=SESSION_STEP_LIMIT)] = 1,
                last: Annotated[int | None, Query(alias="to", ge=0,
                                                  le=SESSION_STEP_LIMIT)] = None,
                snapshots: bool = True) -> Response:
    """The session's whole run as a trace document (docs/trace-format.md), in windows."""
    token, entry = await open_token(session_id)
    window = settings.max_window if snapshots else settings.max_window * 10
    first = max(first, 1)
    if last is None:
        last = min(entry.run.total_steps, first + window - 1)
    if last < first - 1:
        raise fail(422, "query", "to", f"to ({last}) is before from ({first})")
    if last - first + 1 > window:
        raise fail(422, "query", "to", f"a window holds at most {window} steps; "
                                       f"asked for {last - first + 1}")
    doc = await run_in_threadpool(document, token, entry, first, last, snapshots)
    return await run_in_threadpool(answer, doc)


# ------------------------------------------------------------------------------ streaming

class Stream:
    """One client's cursor over a session, played in wall-clock time (pacing lives here, not in
    the engine). Its messages are JSON text around the run's shared frames (`Entry.frame_json`),
    so a class of students watching one lesson costs one move and one encoding per step."""

    def __init__(self, token: SessionToken, entry: Entry):
        self.token = token
        self.entry = entry

    def message(self, *, with_id: bool = True, changed: bool = False, **extra) -> str:
        token, entry = self.token, self.entry
        parts = ['{"type":"state",', entry.frame_json(token.step)[1:-1]]
        if extra:
            parts += [",", json.dumps(extra, separators=(",", ":"))[1:-1]]
        if with_id:
            parts.append(f',"id":"{token.encode()}"')
        if changed:
            run = entry.run
            more = {"changed": True, "scenario": scenario_block(token.key, run),
                    "diagnostics": run.diagnostics, "picks": picks_by_name(entry, token.key)}
            parts += [",", json.dumps(more, separators=(",", ":"))[1:-1]]
        parts.append("}")
        return "".join(parts)


def _speed(raw, field: str = "steps_per_s") -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ParamError(field, f"{field} must be a number of steps per second")
    if not 0 < raw <= MAX_SPEED:
        raise ParamError(field, f"{field} must be in (0, {MAX_SPEED:g}]")
    return float(raw)


class Connections:
    """Open streams of this process, bounded by `settings.max_sessions`."""

    def __init__(self) -> None:
        self.open = 0


connections = Connections()


@router.websocket("/{session_id}/ws")
async def play_socket(websocket: WebSocket, session_id: str) -> None:
    """Messages in: `{"type": "play" | "pause" | "step" | "back" | "seek" | "reset" | "speed"}`
    with `agent`, `step` or `steps_per_s`. Out: `{"type": "state", ...}` after every command and
    every played step, `{"type": "error", "status", "field", "message"}` for a refused command."""
    await websocket.accept()
    try:
        token, entry = await open_token(session_id)
    except HTTPException as err:
        await websocket.send_json({"type": "error", "status": err.status_code,
                                   "field": "session_id", "message": err.detail[0]["msg"]})
        await websocket.close(code=4000 + err.status_code)
        return
    if connections.open >= settings.max_sessions:
        await websocket.send_json({"type": "error", "status": 503, "field": "session_id",
                                   "message": "this server has too many open streams; retry"})
        await websocket.close(code=1013)
        return
    connections.open += 1
    stream = Stream(token, entry)
    state = {"playing": False, "speed": 4.0}
    lock = asyncio.Lock()
    player: asyncio.Task | None = None

    async def send(message: dict | str) -> None:
        text = message if isinstance(message, str) else json.dumps(message, separators=(",", ":"))
        async with lock:
            await websocket.send_text(text)

    async def play() -> None:
        """Advance one step every 1/speed s until the end or a pause."""
        next_at = time.monotonic()
        while state["playing"]:
            next_at += 1.0 / state["speed"]
            delay = next_at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                next_at = time.monotonic()  # fell behind: do not burst to catch up
            if stream.token.step >= stream.entry.run.total_steps:
                state["playing"] = False
                await send(stream.message(**state))
                return
            stream.token = replace(stream.token, step=stream.token.step + 1)
            await send(stream.message(with_id=False, **state))

    def stop() -> None:
        nonlocal player
        state["playing"] = False
        if player is not None:
            player.cancel()
            player = None

    try:
        await send(stream.message(changed=True, **state))
        while True:
            text = await websocket.receive_text()
            try:
                command = json.loads(text) if len(text) <= 4096 else None
                if not isinstance(command, dict):
                    raise ParamError("type", "send one JSON object of at most 4096 bytes")
                kind = command.get("type")
                changed = False
                if kind == "play":
                    if "steps_per_s" in command:
                        state["speed"] = _speed(command["steps_per_s"])
                    if not state["playing"]:
                        if stream.token.step >= stream.entry.run.total_steps:
                            stream.token = replace(stream.token, step=0)
                        state["playing"] = True
                        player = asyncio.create_task(play())
                    continue
                if kind == "speed":
                    state["speed"] = _speed(command.get("steps_per_s"))
                    await send({"type": "speed", "speed": state["speed"]})
                    continue
                if kind == "pause":
                    stop()
                elif kind == "step":
                    stop()
                    agent = command.get("agent")
                    if agent is not None and (not isinstance(agent, str) or len(agent) > 80):
                        raise ParamError("agent", "agent must be a mover's name")
                    old = stream.entry
                    stream.token, stream.entry = await step_session(stream.token, agent)
                    changed = stream.entry is not old
                elif kind == "back":
                    stop()
                    if stream.token.step == 0:
                        raise fail(409, "body", "step", "already at step 0")
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
                    stream.token = SessionToken(key, 0)
                    stream.entry = await store.get(key)
                else:
                    raise ParamError("type", "type must be one of play, pause, speed, step, "
                                             "back, seek, reset")
                await send(stream.message(changed=changed, **state))
            except (ParamError, MoveError, HTTPException) as err:
                await send(_error_message(err))
    except WebSocketDisconnect:
        pass
    finally:
        state["playing"] = False
        if player is not None:
            player.cancel()
        connections.open -= 1


def _error_message(err: Exception) -> dict:
    if isinstance(err, ParamError):
        return {"type": "error", "status": 422, "field": err.field, "message": err.message}
    if isinstance(err, MoveError):
        return {"type": "error", "status": 409, "field": "agent", "message": str(err)}
    detail = err.detail[0]
    return {"type": "error", "status": err.status_code, "field": detail["loc"][-1],
            "message": detail["msg"]}


@router.get("/{session_id}/events")
async def events(session_id: SessionId, request: Request,
                 steps_per_s: Annotated[float, Query(gt=0, le=MAX_SPEED)] = 10.0,
                 first: Annotated[int | None, Query(alias="from", ge=0,
                                                    le=SESSION_STEP_LIMIT)] = None,
                 ) -> StreamingResponse:
    """Server-sent events for read-only clients: one `state` event per step from the session's
    step (or `from`) to the end, then `end`. Each event's `id` is its step, so a reconnecting
    client (`Last-Event-ID`) resumes after the last step it saw."""
    token, entry = await open_token(session_id)
    start = token.step if first is None else first
    last_id = request.headers.get("last-event-id")
    if last_id is not None:
        if not last_id.isdigit() or len(last_id) > 9:
            raise fail(422, "header", "last-event-id", "Last-Event-ID must be a step number")
        start = int(last_id) + 1
    stream = Stream(replace(token, step=start), entry)

    async def lines():
        yield "retry: 1000\n\n"
        step, delay = start, 1.0 / steps_per_s
        next_at = time.monotonic()
        while step <= entry.run.total_steps:
            stream.token = replace(stream.token, step=step)
            data = stream.message(with_id=False, playing=True, speed=steps_per_s)
            yield f"id: {step}\nevent: state\ndata: {data}\n\n"
            step += 1
            next_at += delay
            wait = next_at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if await request.is_disconnected():
                return
        done = {"type": "end", "total_steps": entry.run.total_steps, "status": entry.run.status}
        yield f"event: end\ndata: {json.dumps(done)}\n\n"

    return StreamingResponse(lines(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


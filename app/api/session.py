"""What the session routes, the WebSocket and the SSE stream share: opening an id, moving its
cursor, and the views (JSON text) they answer with. Encoding happens once per frame per run:
FastAPI's generic encoder would walk every snapshot again."""

from __future__ import annotations

import json
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import replace

from fastapi import HTTPException, Response

from app.api.encode import WORKER
from app.api.errors import fail
from app.api.runstore import Entry, RunKey, ready_names, store
from app.api.sources import NeedSource
from app.api.token import MAX_PICKS, SessionToken, unknown_session
from app.api.windows import named_picks
from app.core.clients import identify_sessions, session_client
from app.scenarios import ParamError
from app.sim.machine import Machine, MoveError
from app.sim.snapshot import patch
from app.sim.trace import Run

FRAMES_KEPT = 8192
_frames: OrderedDict[tuple[int, int], str] = OrderedDict()
"""Encoded frames of every run, oldest first (about 2 KB each): bounded, shared by clients."""


def answer(payload: dict | str, status: int = 200) -> Response:
    """A JSON response encoded once by `json.dumps` (or given as JSON text)."""
    text = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return Response(text.encode(), status, headers={"x-worker": WORKER},
                    media_type="application/json")


def frame_json(entry: Entry, step: int, cursor: Machine | None = None) -> str:
    """The frame at `step` as JSON (`step`, `total_steps`, `status`, `ready`, `record`,
    `snapshot`), encoded once and shared by every client standing there. `cursor`, a machine
    standing at `step - 1` (a playing stream's), is moved one step instead of thawing one."""
    key = (entry.serial, step)
    text = _frames.get(key)
    if text is not None:
        if cursor is not None and step > 0:
            cursor.step(entry.run.choices[step - 1])
        return text
    run = entry.run
    if cursor is not None and step > 0:
        record = cursor.step(run.choices[step - 1])
        snapshot, ready = cursor.snapshot(), ready_names(cursor)
    else:
        record, snapshot, ready = entry.frame(step)
    text = json.dumps({"step": step, "total_steps": run.total_steps, "status": run.status,
                       "ready": ready, "record": record, "snapshot": snapshot},
                      separators=(",", ":"))
    _frames[key] = text
    if len(_frames) > FRAMES_KEPT:
        _frames.popitem(last=False)
    return text


def patch_json(entry: Entry, step: int, cursor: Machine,
               before: dict | None) -> tuple[str, dict | None]:
    """The frame at `step` as a patch of the one before (`patch` in place of `snapshot`),
    encoded once per run and step. `cursor` stands at `step - 1` and is moved to `step`;
    `before` is its snapshot if known. Returns the JSON and the new snapshot (None if the
    patch came from the cache)."""
    key = (entry.serial, -step)
    run = entry.run
    text = _frames.get(key)
    if text is not None:
        cursor.step(run.choices[step - 1])
        return text, None
    if before is None:
        before = cursor.snapshot()
    record = cursor.step(run.choices[step - 1])
    snapshot = cursor.snapshot()
    text = json.dumps({"step": step, "total_steps": run.total_steps, "status": run.status,
                       "ready": ready_names(cursor), "record": record,
                       "patch": patch(before, snapshot)}, separators=(",", ":"))
    _frames[key] = text
    if len(_frames) > FRAMES_KEPT:
        _frames.popitem(last=False)
    return text, snapshot


MAX_DIAGNOSTICS = 256
"""Diagnostics a session view or a socket's `changed` message lists: all of a run with at most
this many, else those nearest the cursor (and the run's first one); `diagnostics_total` counts
them all, and GET .../trace windows give the others (a `while (1)` that arrives forever has one
per step: every one of them made a 28.8 MB answer)."""


def diagnostics_near(diagnostics: list[dict], step: int) -> dict:
    """`{"diagnostics": [...], "diagnostics_total": n}` for a cursor at `step`."""
    total = len(diagnostics)
    if total <= MAX_DIAGNOSTICS:
        return {"diagnostics": diagnostics, "diagnostics_total": total}
    at = bisect_left(diagnostics, step, key=lambda d: d["step"])
    lo = max(0, min(at - MAX_DIAGNOSTICS // 2, total - MAX_DIAGNOSTICS + 1))
    near = diagnostics[lo:lo + MAX_DIAGNOSTICS - 1]
    if lo > 0:
        near = [diagnostics[0], *near]
    return {"diagnostics": near, "diagnostics_total": total}


def scenario_block(key: RunKey, run: Run) -> dict:
    return {**run.scenario, "schedule": key.schedule.as_dict()}


def picks_by_name(entry: Entry, key: RunKey) -> list[dict]:
    """The picks as `{"step", "agent"}` with mover names, as a permalink spells them."""
    return named_picks(entry.run, key.picks)


def view(token: SessionToken, entry: Entry, *, layout: bool = False) -> str:
    """A session as the API answers it (JSON text): where the cursor is, what just happened,
    who may move; with `layout`, also the layout, the run's diagnostics (`diagnostics_near`)
    and the picks."""
    run = entry.run
    head = {"id": token.encode(), "scenario": scenario_block(token.key, run)}
    if layout:
        head["layout"] = run.machine_at(0).layout()
        head.update(diagnostics_near(run.diagnostics, token.step))
        head["picks"] = picks_by_name(entry, token.key)
    return (json.dumps(head, separators=(",", ":"))[:-1] + ","
            + frame_json(entry, token.step)[1:])


def clients_of(token: SessionToken, where: str | None = None) -> tuple[str, ...]:
    """Whom work done for `token` is charged to: its session, and the address `where`."""
    return tuple(k for k in (session_client(token), where) if k)


SESSION_PATH = "/api/v1/sessions/"


def session_of_path(path: str) -> str | None:
    """The session client of a request to `/api/v1/sessions/{id}/...` whose id is valid (its
    requests pay its own bucket: app.core.clients.charge_request), else None (its address
    pays). An id is decoded once per process: the route's decode finds it remembered."""
    if not path.startswith(SESSION_PATH):
        return None
    session_id = path[len(SESSION_PATH):].split("/", 1)[0]
    if not session_id:
        return None
    try:
        return session_client(SessionToken.decode(session_id))
    except (HTTPException, NeedSource):  # not a session (yet): its address pays
        return None


identify_sessions(session_of_path)


async def open_token(session_id: str, where: str | None = None) -> tuple[SessionToken, Entry]:
    """The session of an id, with its run; 404 for an id whose run cannot be rebuilt. (The
    request was charged to the session's bucket before: app.core.clients.charge_request.)"""
    token = SessionToken.decode(session_id)
    try:
        entry = await store.get(token.key, clients=clients_of(token, where))
    except ParamError as err:
        raise unknown_session(err.message[:200]) from None
    if token.step > entry.run.total_steps:
        raise unknown_session("its step is past its run's end")
    return token, entry


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
    return replace(token, key=key, step=step + 1), await store.get(
        key, clients=clients_of(token))


def clamp_step(step: int, entry: Entry, location: str = "body") -> int:
    total = entry.run.total_steps
    if not 0 <= step <= total:
        raise fail(422, location, "step", f"step must be in 0..{total}; got {str(step)[:24]}")
    return step

"""Turning user input into run keys: the schedule parser and the path lookup of a scenario (both
over the one scenario lookup, `app.api.runstore.find_scenario`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field, StrictInt, create_model

from app.api.errors import fail
from app.api.runstore import find_scenario
from app.scenarios import PARAM_NAMES, ParamError, Scenario, catalogue
from app.sim.schedule import SCHEDULES, Schedule

MAX_MANUAL_MOVES = 10_000
MAX_SEED = 2**63 - 1


def scenario_or_404(scenario_id: str) -> Scenario:
    try:
        return find_scenario(scenario_id, "scenario_id")
    except ParamError as err:
        raise fail(404, "path", "scenario_id", err.message) from None


def parse_schedule(kind: str | None, seed: int | str | None = None,
                   moves: str | list[str] | None = None) -> Schedule:
    """A `Schedule` from user input; `ParamError` names `schedule`, `seed` or `moves`."""
    kind = kind or "round_robin"
    if kind not in SCHEDULES:
        raise ParamError("schedule", f"schedule must be one of {', '.join(SCHEDULES)}; "
                                     f"got {kind[:40]!r}")
    if kind == "random":
        if seed in (None, ""):
            seed = 0
        try:
            seed = int(seed)
        except (TypeError, ValueError):
            raise ParamError("seed", "seed must be an integer") from None
        if not 0 <= seed <= MAX_SEED:
            raise ParamError("seed", f"seed must be in 0..{MAX_SEED}")
        return Schedule("random", seed=seed)
    if kind == "manual":
        if isinstance(moves, str):
            moves = [m.strip() for m in moves.split(",") if m.strip()]
        moves = list(moves or [])
        if len(moves) > MAX_MANUAL_MOVES:
            raise ParamError("moves", f"at most {MAX_MANUAL_MOVES} manual moves")
        return Schedule("manual", moves=tuple(moves))
    return Schedule(kind)


def _ranges() -> dict[str, tuple[int, int]]:
    """Each parameter's widest range over the catalogue (a scenario may allow less, and some
    rules join fields: a chunk divides its tile), so the OpenAPI bounds say what can pass."""
    out: dict[str, tuple[int, int]] = {}
    for scenario in catalogue().values():
        for name, spec in scenario.parameters.items():
            lo, hi = out.get(name, (spec["min"], spec["max"]))
            out[name] = (min(lo, spec["min"]), max(hi, spec["max"]))
    return out


PARAM_RANGES = _ranges()


class _Forbid(BaseModel):
    model_config = ConfigDict(extra="forbid")


Params = create_model(
    "Params", __base__=_Forbid,
    **{name: (Annotated[StrictInt, Field(ge=PARAM_RANGES[name][0], le=PARAM_RANGES[name][1])]
              | None, None) for name in PARAM_NAMES})
"""A scenario's parameters in a JSON body (absent or null: the scenario's default)."""


def param_query(name: str):
    lo, hi = PARAM_RANGES[name]
    return Annotated[int | None, Query(ge=lo, le=hi)]


def params_dict(params: BaseModel | dict) -> dict:
    if isinstance(params, dict):
        return {k: v for k, v in params.items() if v is not None}
    return params.model_dump(exclude_none=True)
